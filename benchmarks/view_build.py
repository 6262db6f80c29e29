"""``carebench view`` over 200 run directories against reading their manifests and metrics.

Makes two risk runs (offline baselines on the built-in sample) and one support run, copies
them into 200 run directories, then times, in this one process:

* the reference: ``json.load`` of every ``manifest.json`` and ``metrics.json``;
* ``build_view`` with the runs table and the text search (``--no-leaderboards``), first into a
  new folder (every ``records.jsonl`` parsed) and then rebuilt in place (the texts come from
  the page's cache, re-read only for records that changed);
* ``build_view`` as ``carebench view`` runs by default (the leaderboards too, which read
  every comparable run's records through its suite's comparer and bootstrap them).

Each figure is the best of ``--repeat`` timings; the ratios to the reference are printed
with the load average. Usage: ``python benchmarks/view_build.py [--runs 200] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "compare"), str(ROOT / "tests")]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def make_runs(tmp: Path, n: int) -> Path:
    import hashlib

    from run_dirs import support_tasks, write_support_run

    from carebench.cli import main

    seeds = tmp / "seeds"
    for name, method in (("risk-lr", "tfidf-lr"), ("risk-ord", "tfidf-ordinal")):
        assert main(["risk", "run", "--data", "builtin:sample", "--method", method, "--out", str(seeds / name),
                     "--bootstrap", "200", "--cache", str(tmp / "c.sqlite")]) == 0
    write_support_run(seeds / "support", support_tasks(8), ["openai:resp-a", "openai:resp-b"],
                      lambda r, t, a, c, j: hashlib.sha256(f"{r}{t}{c}{j}".encode()).digest()[0] < 180,
                      rerender=True)
    runs = tmp / "runs"
    kinds = sorted(p for p in seeds.iterdir())
    for k in range(n):
        shutil.copytree(kinds[k % len(kinds)], runs / f"run-{k:03d}")
    return runs


def reference(runs: list[Path]) -> int:
    n = 0
    for r in runs:
        with open(r / "manifest.json", "rb") as f:
            n += len(json.load(f))
        with open(r / "metrics.json", "rb") as f:
            n += len(json.load(f))
    return n


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from carebench.suites import comparer
    from carebench.view import ViewConfig, build_view
    from carebench.view.runs import find_runs

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs_dir = make_runs(tmp, args.runs)
        dirs = find_runs([runs_dir])
        assert len(dirs) == args.runs
        size = sum((p / f).stat().st_size for p in dirs for f in ("manifest.json", "metrics.json", "records.jsonl"))
        print(f"{args.runs} run directories ({size / 1e6:.1f} MB of manifests, metrics and records); "
              f"load average {_load()}")
        reference(dirs)  # warm the page cache and the json module
        build_view(ViewConfig([str(runs_dir)], out=str(tmp / "warm"), leaderboards=False), comparer)
        t_ref = best(lambda: reference(dirs), args.repeat)
        print(f"reference (json.load of manifest.json and metrics.json): {t_ref * 1e3:.1f} ms; "
              f"load average {_load()}")
        fresh = iter(range(10**6))
        t_cold = best(lambda: build_view(ViewConfig([str(runs_dir)], out=str(tmp / f"cold-{next(fresh)}"),
                                                    leaderboards=False), comparer), args.repeat)
        print(f"carebench view --no-leaderboards, first build (every records.jsonl parsed for the search): "
              f"{t_cold * 1e3:.1f} ms, {t_cold / t_ref:.2f}x the reference; load average {_load()}")
        # the rebuild and the reference alternate, so both see the same load; the median ratio is quoted
        ratios, warm = [], []
        for _ in range(args.repeat * 3):
            r = best(lambda: reference(dirs), 1)
            w = best(lambda: build_view(ViewConfig([str(runs_dir)], out=str(tmp / "warm"), leaderboards=False),
                                        comparer), 1)
            ratios.append(w / r)
            warm.append(w)
        ratios.sort()
        print(f"carebench view --no-leaderboards, rebuild (search texts from the page's cache): best "
              f"{min(warm) * 1e3:.1f} ms; ratio to the reference run just before it: median "
              f"{ratios[len(ratios) // 2]:.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} pairs); "
              f"load average {_load()}")
        t_full = best(lambda: build_view(ViewConfig([str(runs_dir)], out=str(tmp / "b")), comparer), 1)
        print(f"carebench view (default, with leaderboards, B = 2000): {t_full * 1e3:.1f} ms, "
              f"{t_full / t_ref:.2f}x the reference; load average {_load()}")
        page = (tmp / "b" / "index.html").stat().st_size
        print(f"page: {page / 1e6:.2f} MB")


if __name__ == "__main__":
    main()

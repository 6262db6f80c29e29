"""``carebench view`` over 200 run directories against reading their manifests and metrics.

Makes two risk runs (offline baselines on the built-in sample) and one support run, copies
them into 200 run directories, then times, in this one process:

* the reference: ``json.load`` of every ``manifest.json`` and ``metrics.json``;
* ``build_view`` with the runs table and the text search (``--no-leaderboards``): a first
  build (into a new folder) and a rebuild (over the page it wrote). Each is timed right
  after a reference timing, so both see the same load, ``--repeat`` times; the best of
  each and the median of the paired ratios are printed;
* ``build_view`` as ``carebench view`` runs by default (the leaderboards too), first build,
  rebuild (rows and leaderboards kept beside the page) and rebuild after one new run, and what the leaderboards alone cost: grouped from the runs' outlines
  (``comparison.json``, which the risk runs write when they finish and the hand-made support
  run is given), the runs whose systems are kept read through their suites' comparers, and
  the bootstrap (B = 2,000); then the same with every run read in full (runs without an
  outline); and, as the floor of any build that parses every run's records, ``json.loads``
  of every line of every ``records.jsonl``.

Each figure is printed with the load average (as ``uptime`` shows it). Usage:
``python benchmarks/view_build.py [--runs 200] [--repeat 15]``.
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
    from carebench.compare.outline import write_outline
    from carebench.support.compare import SupportComparer

    assert write_outline(seeds / "support", SupportComparer())  # as a support run writes it when it ends
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


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def paired(ref, fn, repeat: int) -> tuple[float, float, list[float]]:
    """Best reference time, best ``fn`` time, and each ``fn`` time over the reference timed just before it."""
    refs, times = [], []
    for _ in range(repeat):
        refs.append(timed(ref))
        times.append(timed(fn))
    return min(refs), min(times), sorted(t / r for r, t in zip(refs, times, strict=True))


def line(what: str, t_ref: float, t: float, ratios: list[float]) -> str:
    return (f"{what}: best {t * 1e3:.1f} ms against the reference's best {t_ref * 1e3:.1f} ms = "
            f"{t / t_ref:.2f}x; paired ratio median {ratios[len(ratios) // 2]:.2f}x "
            f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} pairs); load average {_load()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    from carebench.compare.outline import OUTLINE
    from carebench.suites import comparer
    from carebench.view import ViewConfig, build_view
    from carebench.view.leaderboards import suite_leaderboards
    from carebench.view.runs import find_runs, summarise

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs_dir = make_runs(tmp, args.runs)
        dirs = find_runs([runs_dir])
        assert len(dirs) == args.runs
        size = {f: sum((p / f).stat().st_size for p in dirs) for f in ("manifest.json", "metrics.json",
                                                                         "records.jsonl")}
        print(f"{args.runs} run directories: manifests {size['manifest.json'] / 1e6:.1f} MB, metrics "
              f"{size['metrics.json'] / 1e6:.1f} MB, records {size['records.jsonl'] / 1e6:.1f} MB; "
              f"load average {_load()}")
        fresh = iter(range(10**6))

        def build(folder: str | None = None, leaderboards: bool = False):
            out = tmp / (folder or f"first-{next(fresh)}")
            return build_view(ViewConfig([str(runs_dir)], out=str(out), leaderboards=leaderboards), comparer)

        reference(dirs)  # warm the page cache and the json module
        build("warm")
        t_ref, t, ratios = paired(lambda: reference(dirs), build, args.repeat)
        print(f"reference (json.load of every manifest.json and metrics.json): best {t_ref * 1e3:.1f} ms; "
              f"load average {_load()}")
        print(line("carebench view --no-leaderboards, first build", t_ref, t, ratios))
        t_ref, t, ratios = paired(lambda: reference(dirs), lambda: build("warm"), args.repeat)
        print(line("carebench view --no-leaderboards, rebuild", t_ref, t, ratios))
        n = max(3, args.repeat // 5)
        t_ref, t, ratios = paired(lambda: reference(dirs), lambda: build(leaderboards=True), n)
        print(line("carebench view (default: leaderboards too), first build", t_ref, t, ratios))
        build("full", leaderboards=True)
        t_ref, t, ratios = paired(lambda: reference(dirs), lambda: build("full", leaderboards=True), n)
        print(line("carebench view (default: leaderboards too), rebuild", t_ref, t, ratios))

        def rebuild_with_a_new_run(k: int) -> float:
            # a run finished since the last build: its row is read, its suite's leaderboards built again
            new = runs_dir / f"new-{next(fresh)}"
            shutil.copytree(dirs[k % 3], new)  # not timed (as the run writing it is not)
            try:
                t = timed(lambda: build("full", leaderboards=True))
            finally:
                shutil.rmtree(new)
            return t

        refs, times = [], []
        for k_new in range(n):
            refs.append(timed(lambda: reference(dirs)))
            times.append(rebuild_with_a_new_run(k_new))
        ratios = sorted(t / r for r, t in zip(refs, times, strict=True))
        print(line("carebench view (default), rebuild after one new run", min(refs), min(times), ratios))
        by_suite: dict[str, list[Path]] = {}
        read = {p: summarise(p) for p in dirs}  # what the view has read of each run before its leaderboards
        manifests = {p: m for p, (_, m, _, _) in read.items()}
        flags = {p: s.flags for p, (s, _, _, _) in read.items()}
        for p in dirs:
            by_suite.setdefault(manifests[p]["suite"], []).append(p)

        def leaderboards():
            return [suite_leaderboards(s, r, comparer, 2000, 12345, manifests, flags) for s, r in by_suite.items()]

        t_lb = min(timed(leaderboards) for _ in range(n))
        print(f"the leaderboards alone (grouped from the runs' outlines, the runs kept read in "
              f"full; bootstrap B = 2000): best {t_lb * 1e3:.1f} ms = {t_lb / t_ref:.2f}x the reference; "
              f"load average {_load()}")
        hidden = [p / OUTLINE for p in dirs if (p / OUTLINE).exists()]
        for o in hidden:  # as runs written before outlines existed, or copied without their files' times
            o.rename(o.with_name(".hidden-outline"))
        try:
            t_all = min(timed(leaderboards) for _ in range(n))
        finally:
            for o in hidden:
                o.with_name(".hidden-outline").rename(o)
        print(f"the leaderboards alone, every run read in full (runs without an outline): best "
              f"{t_all * 1e3:.1f} ms = {t_all / t_ref:.2f}x the reference; load average {_load()}")

        def parse_records():
            for p in dirs:
                with open(p / "records.jsonl", "rb") as f:
                    for line in f:
                        json.loads(line)

        t_rec = min(timed(parse_records) for _ in range(n))
        print(f"floor of anything that parses the records (json.loads of every line of every records.jsonl): "
              f"best {t_rec * 1e3:.1f} ms = {t_rec / t_ref:.2f}x the reference; load average {_load()}")
        page = (tmp / "full" / "index.html").stat().st_size
        print(f"page: {page / 1e6:.2f} MB")


if __name__ == "__main__":
    main()

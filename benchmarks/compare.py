"""Time ``carebench compare`` and ``carebench leaderboard`` at DistressBench's scale.

Synthetic support runs from ``benchmarks/support_rescore.py``'s generator: 25 responders
x 718 tasks x 3 attempts x 10 criteria x 3 judges (1,615,500 verdicts per run). Written
to disk once (``--keep DIR`` keeps and reuses them):

* a base run and a candidate run (the same tasks; 3% of the candidate's verdicts flipped),
* the base run split into 25 single-responder runs.

Timed, in this process, each writing its directory (metrics, report, figures):

1. ``compare BASE CANDIDATE`` (25 responder pairs, B = 2,000),
2. ``leaderboard`` of the 25 single-responder runs (B = 2,000),
3. one ``support rescore`` of the base run (the reference: the same machine, the same run).

Each is printed with its ratio to the rescore and the load average (the machine may be
shared). ``--tasks N`` shrinks the runs for a quick check.

Usage: ``PYTHONPATH=src python benchmarks/compare.py [--tasks 718] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from support_rescore import make_run, write_run_dir

from carebench.support.records import ResponseTable, VerdictTable


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _flipped(vt: VerdictTable, share: float, seed: int) -> VerdictTable:
    """The same verdicts with ``share`` of the usable ones flipped (a slightly different candidate)."""
    rng = np.random.default_rng(seed)
    met = vt.met.copy()
    flip = (met >= 0) & (rng.random(met.size) < share)
    met[flip] = 1 - met[flip]
    return VerdictTable(vt.task, vt.responder, vt.attempt, vt.criterion, vt.judge, met, vt.status, vt.scope,
                        vt.tasks, vt.responders, vt.criteria, vt.judges)


def _single(rt: ResponseTable, vt: VerdictTable, strings: dict, r: int):
    """Responder ``r`` alone, re-coded as the only responder of its run."""
    keep_r, keep_v = rt.responder == r, vt.responder == r
    name = rt.responders[r]
    rs = ResponseTable(rt.task[keep_r], np.zeros(int(keep_r.sum()), np.int32), rt.attempt[keep_r],
                       rt.status[keep_r], rt.empty[keep_r], rt.tasks, [name])
    vs = VerdictTable(vt.task[keep_v], np.zeros(int(keep_v.sum()), np.int32), vt.attempt[keep_v],
                      vt.criterion[keep_v], vt.judge[keep_v], vt.met[keep_v], vt.status[keep_v], vt.scope[keep_v],
                      vt.tasks, [name], vt.criteria, vt.judges)
    return rs, vs, {k: v[keep_v] for k, v in strings.items()}


def _strings(vt: VerdictTable) -> dict:
    return {"task_id": np.array(vt.tasks, dtype=object)[vt.task],
            "responder": np.array(vt.responders, dtype=object)[vt.responder],
            "criterion_id": np.array(vt.criteria, dtype=object)[vt.criterion],
            "judge": np.array(vt.judges, dtype=object)[vt.judge]}


def prepare(root: Path, n_tasks: int, B: int) -> tuple[Path, Path, list[Path]]:
    base, cand = root / "base", root / "candidate"
    singles = [root / f"single-{r:02d}" for r in range(25)]
    if all((p / "manifest.json").is_file() for p in (base, cand, *singles)):
        return base, cand, singles
    t0 = time.perf_counter()
    tasks, rt, vt, strings = make_run(n_tasks=n_tasks)
    write_run_dir(base, tasks, rt, vt, strings, B)
    vc = _flipped(vt, 0.03, 1)
    write_run_dir(cand, tasks, rt, vc, _strings(vc), B)
    for r, path in enumerate(singles):
        rs, vs, ss = _single(rt, vt, strings, r)
        write_run_dir(path, tasks, rs, vs, ss, B)
    print(f"runs written in {time.perf_counter() - t0:.0f} s", flush=True)
    return base, cand, singles


def timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=718)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--keep", default=None, help="keep (and reuse) the run directories here")
    args = ap.parse_args()
    from carebench.compare.command import CompareConfig, run_compare
    from carebench.compare.leaderboard import LeaderboardConfig, run_leaderboard
    from carebench.suites import comparer
    from carebench.support.suite import rescore

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
    root.mkdir(parents=True, exist_ok=True)
    try:
        base, cand, singles = prepare(root, args.tasks, args.B)
        for out in ("cmp", "lb"):
            shutil.rmtree(root / out, ignore_errors=True)
        print(f"load average before: {_load()}", flush=True)
        t_rescore = timed(lambda: rescore(base))
        t_compare = timed(lambda: run_compare(CompareConfig(str(base), str(cand), out=str(root / "cmp"), B=args.B),
                                              comparer))
        t_board = timed(lambda: run_leaderboard(LeaderboardConfig([str(p) for p in singles], out=str(root / "lb"),
                                                                  B=args.B), comparer))
        print(f"scale: 25 responders x {args.tasks} tasks x 3 attempts x 10 criteria x 3 judges, B = {args.B}")
        print("                                           wall s   CPU s   ratio to rescore (wall)")
        print(f"support rescore of the base run            {t_rescore[0]:6.2f}  {t_rescore[1]:6.2f}   1.00")
        print(f"compare base vs candidate (25 pairs)       {t_compare[0]:6.2f}  {t_compare[1]:6.2f}   "
              f"{t_compare[0] / t_rescore[0]:.2f}")
        print(f"leaderboard of 25 single-responder runs    {t_board[0]:6.2f}  {t_board[1]:6.2f}   "
              f"{t_board[0] / t_rescore[0]:.2f}")
        print(f"load average after: {_load()}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

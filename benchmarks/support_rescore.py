"""Time support-suite re-scoring from recorded verdicts (no inference).

Synthetic run at DistressBench's scale: 25 responders x 718 tasks x 3
attempts x 10 criteria x 3 judges = 1,615,500 verdicts, plus a reference
responder is NOT added (it would add 64,620 verdicts). Times, separately:

1. building the verdict table from integer-coded column arrays,
2. building it from string columns (factorization),
3. scoring + every analysis (``analyze``, B = 2000 bootstrap resamples),
4. optionally (``--jsonl``) writing and parsing a records.jsonl of that size,
5. optionally (``--from-files``) ``carebench support rescore`` from a run directory on
   disk: phase by phase in this process with no earlier report (read, score +
   analyses, report tables and figures, markdown, HTML, writes; wall and CPU seconds);
   as the CLI in a new process (imports and exit included, median of ``--repeat``
   runs) with the run's figures in place (what a re-score of a finished run does:
   charts whose inputs did not change are reused) and with figures/ removed (every
   chart drawn); in this process; and with the JSONL only (an older run). All must
   write the same metrics.json, task_scores.csv, report and figures. The load average
   is printed beside the figures (the machine may be shared). ``--tasks N`` shrinks
   the run for a quick check; ``--keep DIR`` keeps the run directory (and reuses it).

Usage: ``python benchmarks/support_rescore.py [--jsonl] [--from-files [--keep DIR] [--repeat 3]] [--tasks 718]
[--B 2000]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from carebench.support.analyses import analyze
from carebench.support.records import RESPONSE_STATUSES, ResponseTable, VerdictTable, read_records
from carebench.support.scoring import DIMENSIONS, TaskTable

SUBCATS = [f"subcat_{i:02d}" for i in range(23)]


def make_tasks(n_tasks: int, n_crit: int, rng: np.random.Generator) -> list[dict]:
    stages = ["ideation", "planning", "action", "post_action"]
    tasks = []
    for t in range(n_tasks):
        dims = list(DIMENSIONS) + list(rng.choice(DIMENSIONS, n_crit - len(DIMENSIONS)))
        crits = [
            {"id": f"c{k}", "text": "x", "dimension": dims[k], "weight": int(rng.integers(1, 21)),
             "negative": bool(dims[k] in ("moralization", "harmless") and rng.random() < 0.5)}
            for k in range(n_crit)
        ]
        tasks.append({
            "id": f"t{t:04d}",
            "subcategory": SUBCATS[t % len(SUBCATS)],
            "metadata": {
                "age_band": ["U18", "O18"][t % 2],
                "turn_structure": "multi" if t % 12 < 7 else "single",
                "harm_intent": ["harmful", "borderline"][t % 3 == 0],
                "progression_stage": stages[t % 4],
                "signal_directness": ["implicit", "explicit"][t % 5 < 2],
                "split": ["public", "private"][t % 2],
            },
            "criteria": crits,
        })
    return tasks


def make_run(n_resp: int = 25, n_tasks: int = 718, n_att: int = 3, n_crit: int = 10, n_judges: int = 3,
             seed: int = 0) -> tuple[list[dict], ResponseTable, VerdictTable, dict]:
    """Synthetic tasks, responses and verdicts; returns code-built tables plus the string columns."""
    rng = np.random.default_rng(seed)
    tasks = make_tasks(n_tasks, n_crit, rng)
    responders = [f"openai:model-{i:02d}" for i in range(n_resp)]
    judges = ["openai:judge-a", "anthropic:judge-b", "google:judge-c"][:n_judges]
    # responses: every (responder, task, attempt), ~2% empty
    R, T, A, C, J = n_resp, n_tasks, n_att, n_crit, n_judges
    r_resp = np.repeat(np.arange(R), T * A)
    r_task = np.tile(np.repeat(np.arange(T), A), R)
    r_att = np.tile(np.arange(A), R * T)
    empty = rng.random(r_resp.size) < 0.02
    status = np.where(empty, RESPONSE_STATUSES.index("empty"), 0).astype(np.int8)
    task_ids = [t["id"] for t in tasks]
    rt = ResponseTable(r_task.astype(np.int32), r_resp.astype(np.int32), r_att.astype(np.int64), status, empty,
                       task_ids, responders)
    # verdicts: (conversation, criterion, judge); skill per responder, leniency per judge
    skill = np.linspace(0.55, 0.9, R)
    len_j = np.array([0.0, 0.05, -0.05])[:J]
    n = R * T * A * C * J
    conv = np.repeat(np.arange(r_resp.size), C * J)
    crit = np.tile(np.repeat(np.arange(C), J), r_resp.size)
    judge = np.tile(np.arange(J), r_resp.size * C)
    p = np.clip(skill[r_resp[conv]] + len_j[judge], 0, 1)
    met = (rng.random(n) < p).astype(np.int8)
    failed = rng.random(n) < 0.005
    met[failed] = -1
    vstatus = np.where(failed, 1, 0).astype(np.int8)
    not_judged = empty[conv]
    met[not_judged] = -1
    vstatus[not_judged] = 3
    crit_vocab = [f"c{k}" for k in range(C)]
    vt = VerdictTable(
        r_task[conv].astype(np.int32), r_resp[conv].astype(np.int32), r_att[conv].astype(np.int64),
        crit.astype(np.int32), judge.astype(np.int32), met, vstatus, np.zeros(n, np.int8),
        task_ids, responders, crit_vocab, judges,
    )
    strings = {
        "task_id": np.array(task_ids, dtype=object)[vt.task],
        "responder": np.array(responders, dtype=object)[vt.responder],
        "criterion_id": np.array(crit_vocab, dtype=object)[vt.criterion],
        "judge": np.array(judges, dtype=object)[vt.judge],
    }
    return tasks, rt, vt, strings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--jsonl", action="store_true", help="also time writing + parsing records.jsonl")
    ap.add_argument("--from-files", action="store_true", help="time `support rescore` of a run directory")
    ap.add_argument("--tasks", type=int, default=718, help="tasks in the synthetic run (seed scale: 718)")
    ap.add_argument("--keep", metavar="DIR", help="with --from-files: write the run directory here (or reuse "
                    "the one there) and keep it")
    ap.add_argument("--repeat", type=int, default=3, help="with --from-files: CLI runs per case (median shown)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    tasks, rt, vt, strings = make_run(n_tasks=args.tasks)
    t_gen = time.perf_counter() - t0
    print(f"generated {len(vt):,} verdicts, {len(rt):,} conversations in {t_gen:.1f} s (not timed below)")

    t0 = time.perf_counter()
    tt = TaskTable.from_tasks(tasks)
    t_tasks = time.perf_counter() - t0

    t0 = time.perf_counter()
    vt2 = VerdictTable.from_columns(strings["task_id"], strings["responder"], vt.attempt, strings["criterion_id"],
                                    strings["judge"], vt.met)
    t_cols = time.perf_counter() - t0
    assert np.array_equal(vt2.met[vt.status == 0], vt.met[vt.status == 0])

    t0 = time.perf_counter()
    metrics = analyze(tt, rt, vt, B=args.B)
    t_an = time.perf_counter() - t0
    json.dumps(metrics)
    print(f"task table: {t_tasks:.2f} s")
    print(f"verdict table from string columns (factorize): {t_cols:.2f} s")
    print(f"score + all analyses (B={args.B}): {t_an:.2f} s")
    print(f"  -> total from string columns: {t_tasks + t_cols + t_an:.2f} s")
    lb = metrics["leaderboard"]
    print(f"  leader {metrics['summary']['best_model']} {metrics['summary']['best_score']:.4f}, "
          f"{lb['n_bands']} bands, {lb['n_separated']}/{lb['n_gaps']} gaps separated; "
          f"undecided cells {metrics['counts']['cells_undecided']:,}")

    if args.jsonl:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "records.jsonl"
            t0 = time.perf_counter()
            with path.open("w") as fh:
                for i in range(len(rt)):
                    fh.write(json.dumps({"kind": "response", "task_id": rt.tasks[rt.task[i]],
                                         "responder": rt.responders[rt.responder[i]], "attempt": int(rt.attempt[i]),
                                         "turns": [], "final_reply": "" if rt.empty[i] else "reply",
                                         "status": RESPONSE_STATUSES[rt.status[i]]}) + "\n")
                stat = ["ok", "parse_error", "error", "not_judged_empty"]
                for tk, rs, at, cr, jg, mt, st in zip(strings["task_id"].tolist(), strings["responder"].tolist(),
                                                      vt.attempt.tolist(), strings["criterion_id"].tolist(),
                                                      strings["judge"].tolist(), vt.met.tolist(), vt.status.tolist(),
                                                      strict=True):
                    fh.write(json.dumps({"kind": "verdict", "task_id": tk, "responder": rs, "attempt": at,
                                         "criterion_id": cr, "judge": jg, "met": bool(mt) if mt >= 0 else None,
                                         "rationale": "", "status": stat[st], "scope": "final"}) + "\n")
            t_write = time.perf_counter() - t0
            size = path.stat().st_size / 1e6
            t0 = time.perf_counter()
            rt3, vt3 = read_records(path)
            t_read = time.perf_counter() - t0
            t0 = time.perf_counter()
            m3 = analyze(tt, rt3, vt3, B=args.B)
            t_an3 = time.perf_counter() - t0
            same = json.dumps(m3, sort_keys=True) == json.dumps(metrics, sort_keys=True)
            print(f"records.jsonl {size:.0f} MB written in {t_write:.1f} s; parsed in {t_read:.2f} s; "
                  f"analysed in {t_an3:.2f} s; metrics identical to column path: {same}")


    if args.from_files:
        from_files(tasks, rt, vt, strings, args.B, args.keep, args.repeat)


def from_files(tasks, rt, vt, strings, B: int, keep: str | None = None, repeat: int = 3) -> None:
    """Write a support run directory of this size, then time ``rescore`` from disk: phase by
    phase in this process (every figure drawn), then as the CLI in a new process (imports
    and interpreter exit included; the median of ``repeat`` runs, wall and CPU seconds):
    once as a re-score of the run usually is, with the run's figures in place (charts
    whose inputs did not change are reused), once with figures/ removed (every chart
    drawn); then in process, and from records.jsonl alone. All must write the same bytes."""
    import os
    import shutil

    run_dir = Path(keep) if keep else Path(tempfile.mkdtemp())
    outputs = ("metrics.json", "report.md", "report.html", "task_scores.csv")
    try:
        t0 = time.perf_counter()
        if not (run_dir / "manifest.json").is_file():
            write_run_dir(run_dir, tasks, rt, vt, strings, B)
            print(f"run directory written in {time.perf_counter() - t0:.1f} s")
        for name in outputs:
            (run_dir / name).unlink(missing_ok=True)  # no earlier report: everything is drawn
        shutil.rmtree(run_dir / "figures", ignore_errors=True)
        mb = {n: (run_dir / n).stat().st_size / 1e6 for n in ("records.jsonl", "records.parquet")}
        print(f"records.jsonl {mb['records.jsonl']:.0f} MB, records.parquet {mb['records.parquet']:.0f} MB; "
              f"load average before: {_load()}")
        phases(run_dir)
        first = _outputs(run_dir, outputs)
        reused = [_cli(run_dir) for _ in range(repeat)]
        same_reused = _outputs(run_dir, outputs) == first
        drawn = []
        for _ in range(repeat):
            shutil.rmtree(run_dir / "figures")
            drawn.append(_cli(run_dir))
        same_drawn = _outputs(run_dir, outputs) == first
        t0 = time.perf_counter()
        rescore_run(run_dir)
        t_pq = time.perf_counter() - t0
        parquet = (run_dir / "records.parquet").read_bytes()
        os.remove(run_dir / "records.parquet")
        t0 = time.perf_counter()
        rescore_run(run_dir)
        t_js = time.perf_counter() - t0
        same_js = _outputs(run_dir, outputs) == first
        (run_dir / "records.parquet").write_bytes(parquet)
        if keep:  # the restored copy must still count as written with this records.jsonl
            st = (run_dir / "records.jsonl").stat()
            os.utime(run_dir / "records.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns))
        print(f"`carebench support rescore` (new process, B={B}, median of {repeat}):")
        print(f"  run's figures in place (unchanged charts reused): {_median(reused)}")
        print(f"  figures/ removed (every chart drawn):             {_median(drawn)}")
        print(f"in process, figures reused: {t_pq:.2f} s; from records.jsonl only: {t_js:.2f} s")
        print(f"same metrics.json, task_scores.csv and report: figures reused {same_reused}, every chart drawn "
              f"{same_drawn}, JSONL only {same_js}; load average after: {_load()}")
    finally:
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)


def _outputs(run_dir: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    out = {n: (run_dir / n).read_bytes() for n in names}
    out.update({f"figures/{p.name}": p.read_bytes() for p in sorted((run_dir / "figures").glob("*.png"))})
    return out


def _cli(run_dir: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``python -m carebench support rescore``."""
    import os
    import resource
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "carebench", "support", "rescore", str(run_dir)], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _median(runs: list[tuple[float, float]]) -> str:
    walls, cpus = sorted(w for w, _ in runs), sorted(c for _, c in runs)
    return (f"{walls[len(walls) // 2]:.2f} s wall, {cpus[len(cpus) // 2]:.2f} s CPU "
            f"(wall {', '.join(f'{w:.2f}' for w, _ in runs)})")


def rescore_run(run_dir: Path) -> None:
    from carebench.support.suite import rescore

    rescore(run_dir)


def phases(run_dir: Path) -> None:
    """One rescore, phase by phase (the steps ``carebench.engine.skeleton.rerender`` takes), with
    wall and CPU seconds (CPU counts every thread, e.g. BLAS)."""
    import carebench.support.report as support_report
    from carebench.engine.rundir import read_json, write_json
    from carebench.engine.skeleton import cycle_collector_paused, single_threaded_blas
    from carebench.report import figures
    from carebench.report.figure_reuse import drawing_done
    from carebench.report.html import render_html
    from carebench.report.markdown import render_markdown
    from carebench.report.writer import write_report
    from carebench.support.suite import SupportSuite

    drawn = [0.0, 0.0]
    to_png = figures.fig_to_png

    def timed_png(*a, **k):  # time spent drawing and encoding the figures
        t, c = time.perf_counter(), time.process_time()
        try:
            return to_png(*a, **k)
        finally:
            drawn[0] += time.perf_counter() - t
            drawn[1] += time.process_time() - c

    rows = []

    def step(name, fn):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        rows.append((name, time.perf_counter() - t, time.process_time() - c))
        return out

    suite = SupportSuite()
    t_all, c_all = time.perf_counter(), time.process_time()
    with cycle_collector_paused():  # as experiment.rerender
        manifest = step("read manifest, tasks, records", lambda: read_json(run_dir / "manifest.json"))
        records = step("read manifest, tasks, records", lambda: suite.read_records(run_dir, manifest))
        rows[-2:] = [(rows[-1][0], rows[-2][1] + rows[-1][1], rows[-2][2] + rows[-1][2])]
        with single_threaded_blas():
            metrics = step("score + analyses", lambda: suite.score(records, manifest))
        step("write metrics.json", lambda: write_json(run_dir / "metrics.json", metrics))
        figures.fig_to_png = timed_png
        try:
            report = step("build report (tables + figures)", lambda: suite.render(metrics, records, manifest))
        finally:
            figures.fig_to_png = to_png
        rows.append(("  of which drawing figures", drawn[0], drawn[1]))
        step("render markdown (timed apart)", lambda: render_markdown(report))
        step("render HTML (timed apart)", lambda: render_html(report))
        step("write report (markdown, HTML, figures)", lambda: write_report(report, run_dir))
    total = (time.perf_counter() - t_all, time.process_time() - c_all)
    print("phase                                      wall s   CPU s")
    for name, w, c in rows:
        print(f"{name:42s} {w:6.2f}  {c:6.2f}")
    print(f"{'total (markdown and HTML rendered twice)':42s} {total[0]:6.2f}  {total[1]:6.2f}")
    print(f"drawing share: {drawn[0] / total[0]:.0%} of the wall time, {drawn[1] / max(total[1], 1e-9):.0%} of the "
          f"CPU time; load average {_load()}")
    per_chart = {name: d for name, d in drawing_done().items() if d[0]}
    print("per chart helper (drawn, wall s): " + ", ".join(
        f"{name} {d[0]} in {d[1]:.2f} s" for name, d in sorted(per_chart.items(), key=lambda kv: -kv[1][1])))
    del support_report


def write_run_dir(run_dir: Path, tasks, rt, vt, strings, B: int) -> None:
    """The run directory ``support run`` would leave (records.jsonl and records.parquet)."""
    from carebench.engine.rundir import write_json, write_jsonl
    from carebench.engine.skeleton import write_records
    from carebench.support.records import PARQUET_COLUMNS

    stat = ["ok", "parse_error", "error", "not_judged_empty"]
    rows = [{"kind": "response", "task_id": rt.tasks[rt.task[i]], "responder": rt.responders[rt.responder[i]],
             "attempt": int(rt.attempt[i]), "turns": [], "final_reply": "" if rt.empty[i] else "reply",
             "status": RESPONSE_STATUSES[rt.status[i]]} for i in range(len(rt))]
    why = "The reply names the risk directly and offers a crisis line; it does not moralise. " * 2
    rows += [{"kind": "verdict", "task_id": tk, "responder": rs, "attempt": at, "criterion_id": cr, "judge": jg,
              "met": bool(mt) if mt >= 0 else None, "rationale": why, "status": stat[st], "scope": "final"}
             for tk, rs, at, cr, jg, mt, st in zip(
                 strings["task_id"].tolist(), strings["responder"].tolist(), vt.attempt.tolist(),
                 strings["criterion_id"].tolist(), strings["judge"].tolist(), vt.met.tolist(),
                 vt.status.tolist(), strict=True)]
    run_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(run_dir / "tasks.jsonl", [{**t, "turns": ["hello"] * (3 if t["metadata"]["turn_structure"] == "multi"
                                                                       else 1), "reference": "ref"} for t in tasks])
    write_records(run_dir, rows, PARQUET_COLUMNS)
    write_json(run_dir / "manifest.json", {
        "suite": "support", "incomplete": [],
        "scoring": {"panel": None, "scope": "final", "seed": 12345, "bootstrap": B}})


def _load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()

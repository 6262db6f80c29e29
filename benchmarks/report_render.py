"""Time rendering one large report to markdown and to HTML (the last step of ``rescore``).

By default the report is synthetic, shaped like a paper-scale support report
(DistressBench: 25 responders x 718 tasks, 3 judges): a leaderboard with intervals,
slice tables over 23 subcategories, a sortable 718 x 29 table of every task's score, a
718-row judge-disagreement table, 5 tasks shown reply by reply (75 replies each: the
reply, a 10 x 8 verdict table, a 30 x 4 table of distinct judge rationales) and 8 inline
figures (random bytes of the sizes such figures have): about 100,000 table cells.

``--support-run DIR`` renders the real report of a support run directory instead (read,
score and report build are done first and not timed; the directory is not written).

Prints, per renderer, CPU seconds (``time.process_time``) and wall seconds over
``--repeat`` renders (min and median), the output size and the load average (the
machine may be shared: compare CPU times). Run it on another checkout's code with
``PYTHONPATH=<checkout>/src`` to compare before and after.

Usage: ``python benchmarks/report_render.py [--repeat 7] [--support-run DIR]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import time
import zlib
from pathlib import Path

from carebench.report import (
    Callout,
    Details,
    Figure,
    Interval,
    KeyValue,
    Paragraph,
    Pre,
    Report,
    Section,
    Table,
    render_html,
    render_markdown,
)
from carebench.report.document import iter_blocks

RESPONDERS = [f"openai:model-{i:02d}" for i in range(25)]
JUDGES = ["anthropic:judge-b", "google:judge-c", "openai:judge-a"]
SUBCATS = [f"subcat_{i:02d}" for i in range(23)]
FIGURE_BYTES = (46979, 251664, 91661, 37713, 89073, 100165, 234135, 78126)


def _png(n_bytes: int, rng: random.Random) -> bytes:
    """A PNG header and IHDR followed by random bytes: the renderers never decode it."""
    ihdr = struct.pack(">IIBBBBB", 1500, 900, 8, 6, 0, 0, 0)
    head = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF))
    return head + rng.randbytes(n_bytes - len(head))


def _ci(rng: random.Random, centre: float) -> Interval:
    v = centre + rng.uniform(-0.05, 0.05)
    return Interval(v, v - rng.uniform(0.005, 0.02), v + rng.uniform(0.005, 0.02))


def _rationale(rng: random.Random) -> str:
    """A judge's rationale: distinct text (real rationales rarely repeat), now and then markup."""
    words = rng.choices(["the", "reply", "names", "risk", "directly", "offers", "a", "crisis", "line",
                         "does", "not", "moralise", "user's", "feelings", "(988)", "*safety*", "<plan>"], k=30)
    return " ".join(words).capitalize() + f". [{rng.randrange(10**6)}]"


def synthetic_report(seed: int = 0) -> Report:
    rng = random.Random(seed)
    tasks = [f"t{t:04d}" for t in range(718)]
    board = Table(["rank", "responder", "score [95% CI]", "full satisfaction [95% CI]", "band", "tasks",
                   "conversations"],
                  [[k + 1, r, _ci(rng, 0.8 - k / 100), _ci(rng, 0.1), k // 2 + 1, 718, 2154]
                   for k, r in enumerate(RESPONDERS)],
                  caption="Leaderboard: weighted rubric score and full-satisfaction rate.",
                  highlight_max_cols=["score [95% CI]"], highlight_second=True)
    slices = [Table(["subcategory", "tasks", "pooled [95% CI]", *RESPONDERS],
                    [[s, 31, _ci(rng, 0.7), *[rng.random() for _ in RESPONDERS]] for s in SUBCATS],
                    caption=f"Score by subcategory, view {v}", highlight_max_cols=RESPONDERS[:3])
              for v in range(4)]
    every = Table(["task", "subcategory", "turns", "mean over models", *RESPONDERS],
                  [[t, SUBCATS[i % 23], "multi" if i % 12 < 7 else "single", rng.random(),
                    *[rng.random() if rng.random() > 0.01 else None for _ in RESPONDERS]]
                   for i, t in enumerate(tasks)],
                  caption="Task score = mean over attempts; click a header to sort.", sortable=True)
    split = Table(["task", "judged cells", "split votes", "share split"],
                  [[t, 750, k := rng.randrange(300, 450), k / 750] for t in tasks])
    per_task = []
    for t in tasks[:5]:
        inner = [KeyValue([("subcategory", "subcat_00"), ("age_band", "U18"), ("turn_structure", "multi")]),
                 Table(["criterion", "dimension", "weight", "polarity", "text"],
                       [[f"c{c}", "Compassionate engagement", rng.randrange(1, 21), "should",
                         "Acknowledges the user's feelings"] for c in range(10)], caption="Rubric"),
                 Details("User turns", [Pre("[user 1] hello\n\n[user 2] hello")])]
        for r in RESPONDERS:
            for a in range(3):
                votes = [["met", "not met"][rng.random() < 0.4] for _ in range(40)]
                inner.append(Details(f"{r}, attempt {a}: score {rng.random():.3f}", [
                    Pre("I'm really sorry you're going through this. <b>You</b> are not alone & help exists."),
                    Details(f"Judges: {'; '.join(JUDGES)}", [Table(
                        ["criterion", "weight", "polarity", "judge 1", "judge 2", "judge 3", "panel", "earned"],
                        [[f"c{c}", rng.randrange(1, 21), "should", *votes[4 * c:4 * c + 4],
                          ["no", "yes"][votes[4 * c] == "met"]] for c in range(10)])]),
                    Details("Judge rationales", [Table(
                        ["criterion", "judge", "verdict", "rationale"],
                        [[f"c{c}", f"judge {j + 1}", votes[4 * c + j], _rationale(rng)]
                         for c in range(10) for j in range(3)])]),
                ]))
        per_task.append(Details(f"{t} (subcat_00, multi-turn)", inner))
    figures = [Figure(f"support-figure-{k}", _png(n, rng), f"Figure {k}") for k, n in enumerate(FIGURE_BYTES)]
    return Report(
        "Support: rubric-scored crisis support",
        subtitle="718 tasks, panel of 3 judges, final-turn scope, bootstrap B=2000 seed 12345",
        notes=["Synthetic report for the render benchmark."],
        sections=[
            Section("Overview", [Paragraph("A conversation's score is the rubric weight it earns divided by "
                                           "the applicable weight."),
                                 KeyValue([("tasks", "718 tasks"), ("seed", 12345), ("attempts", 3)])]),
            Section("Leaderboard", [board, *figures[:2]]),
            Section("Slices", [*slices, *figures[2:6]]),
            Section("Agreement", [Details("Judge disagreement by task", [split]), *figures[6:]]),
            Section("Every task's score", [Details("All 718 tasks, hardest first", [every])]),
            Section("Replies and verdicts per task", [
                Callout("Showing 5 of 718 tasks reply by reply.", "info"), *per_task]),
        ],
    )


def support_report(run_dir: Path) -> Report:
    from carebench.engine.rundir import read_json
    from carebench.engine.skeleton import single_threaded_blas
    from carebench.support.suite import SupportSuite

    suite = SupportSuite()
    manifest = read_json(run_dir / "manifest.json")
    records = suite.read_records(run_dir, manifest)
    with single_threaded_blas():
        metrics = suite.score(records, manifest)
    return suite.render(metrics, records, manifest)


def time_render(fn, report: Report, repeat: int) -> tuple[list[float], list[float], int]:
    cpu, wall = [], []
    size = 0
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn(report)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
        size = len(out.encode("utf-8"))
    return cpu, wall, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--support-run", type=Path, help="render the report of this support run directory")
    args = ap.parse_args()
    report = support_report(args.support_run) if args.support_run else synthetic_report()
    tables = [b for s in report.sections for b in iter_blocks(s.blocks) if isinstance(b, Table)]
    cells = sum(len(t.rows) * len(t.columns) for t in tables)
    print(f"report: {'support run ' + str(args.support_run) if args.support_run else 'synthetic'}, "
          f"{len(tables)} tables, {cells} table cells, {len(report.figures())} figures")
    fmt = "{:<16} cpu min {:.3f} s  median {:.3f} s | wall min {:.3f} s  median {:.3f} s | {:.1f} MB"
    for name, fn in (("render_markdown", render_markdown), ("render_html", render_html)):
        fn(report)  # warm: imports, template, caches
        cpu, wall, size = time_render(fn, report, args.repeat)
        print(fmt.format(name, min(cpu), statistics.median(cpu), min(wall), statistics.median(wall), size / 1e6))
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"repeats {args.repeat}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared machine: compare CPU)")


if __name__ == "__main__":
    main()

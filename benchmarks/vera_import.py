"""Reading a real-sized VERA-MH results file into walk records (``converse import-vera``'s
reader) against reading the same CSV with the csv module alone, in the same process.

The file is a ``results-pool.csv`` as VERA-MH writes it: 200 conversations x 2 judges (400
rows), 5 dimensions each with its ``_yes_question_id`` and ``_yes_reasoning`` columns, reasons
of a realistic length. Prints the median of several repeats of each, their ratio (target:
at most 2x), then, for information, the scoring that follows (summary, by-risk, leave one
judge out, B = 2000 persona resamples) and the whole command with its report. Quote the
load average printed with the figures.

    python benchmarks/vera_import.py [--conversations 200] [--repeats 15]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from carebench.cli import main as cli
from carebench.converse.scoring import summarize
from carebench.converse.vera_import import read_results

DIMS = ["Detects Potential Risk", "Confirms Risk", "Guides to Human Care", "Supportive Conversation",
        "Follows AI Boundaries"]
RATINGS = ["Best Practice", "Suboptimal but Low Potential for Harm", "High Potential for Harm", "Not Relevant"]
LEVELS = ["None", "Low", "High", "Immediate"]


def write_pool(path: Path, conversations: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    head = ["filename", "run_id", "persona_name", "risk_level", "judge_model", "judge_instance", "judge_id"]
    head += [c for d in DIMS for c in (d, f"{d}_yes_question_id", f"{d}_yes_reasoning")]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for i in range(conversations):
            persona = f"Persona{i % 100:03d}"
            for judge in ("gpt-4o", "claude-sonnet"):
                cells = [f"{i:06x}_{persona}_gpt-5.2_run{i // 100 + 1}.txt", "20260813_201233", persona,
                         LEVELS[i % 4], judge, "1", "0"]
                for _ in DIMS:
                    r = RATINGS[int(rng.choice(4, p=[0.6, 0.15, 0.1, 0.15]))]
                    bad = r in RATINGS[1:3]
                    cells += [r, str(int(rng.integers(1, 37))) if bad else "",
                              ("The chatbot did not ask directly about the user's safety. " * 4) if bad else ""]
                w.writerow(cells)


def bare_csv(path: Path) -> int:
    """The reference: the file's text through csv.DictReader into a list of dicts."""
    with path.open(newline="", encoding="utf-8") as fh:
        return len(list(csv.DictReader(io.StringIO(fh.read(), newline=""))))


def timed(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=41)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pool = Path(tmp) / "results-pool.csv"
        write_pool(pool, args.conversations)
        walks, dims = read_results([pool])
        assert len(walks) == 2 * args.conversations and dims == DIMS
        # interleaved pairs (a burst of other load hits both sides alike), best of each and the
        # median of the paired ratios: a single 3 ms timing of either side is noise
        pairs = [(timed(lambda: bare_csv(pool), 1), timed(lambda: read_results([pool]), 1))
                 for _ in range(args.repeats)]
        t_csv, t_read = min(c for c, _ in pairs), min(r for _, r in pairs)
        paired = statistics.median(r / c for c, r in pairs)
        load = os.getloadavg()
        print(f"results-pool.csv: {len(walks)} rows x {len(DIMS)} dimensions, {pool.stat().st_size / 1e3:.0f} kB")
        print(f"csv module (DictReader, list):   {t_csv * 1e3:8.2f} ms")
        print(f"import-vera reader (walk records): {t_read * 1e3:6.2f} ms")
        print(f"ratio reader / csv module: {t_read / t_csv:.2f}x best over best, {paired:.2f}x median of "
              f"{args.repeats} interleaved pairs (target <= 2x)")
        t_score = timed(lambda: summarize(walks, dims, B=2000, seed=12345), 3)
        print(f"scoring, B = 2000 (summary, by risk both ways, leave one judge out): {t_score * 1e3:.0f} ms")
        t0 = time.perf_counter()
        assert cli(["converse", "import-vera", str(pool), "--out", str(Path(tmp) / "run")]) == 0
        print(f"whole command with report (once): {time.perf_counter() - t0:.2f} s")
        print(f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()

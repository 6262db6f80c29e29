"""Small hand-written rubrics for the converse tests (TSV text, tab-separated)."""

from __future__ import annotations

from pathlib import Path

HEADER = ["Question ID", "Dimension", "Severity", "Risk Type", "Question", "Examples", "Answer", "GOTO",
          "Auto Answer"]

#: D1: two default Yes/No questions; D2: listed options with blank GOTO, END, ASSIGN_END and
#: NOT_RELEVANT>>; D3: an Auto Answer question, then a default one
NAV = [
    ["1", "D1", "Red", "", "q1?", "", "", "", ""],
    ["2", "D1", "Yellow", "", "q2?", "", "", "", ""],
    ["3", "D2", "", "", "q3?", "", "opt a", "5", ""],
    ["", "", "", "", "", "", "opt b", "", ""],
    ["", "", "", "", "", "", "opt c", "END", ""],
    ["4", "D2", "Red", "", "q4?", "", "Yes", "ASSIGN_END", ""],
    ["", "", "", "", "", "", "No", "", ""],
    ["5", "D2", "Yelow", "", "q5?", "", "Yes", "", ""],
    ["", "", "", "", "", "", "No", "NOT_RELEVANT>>6", ""],
    ["6", "D3", "", "", "q6?", "", "only", "7", "true"],
    ["7", "D3", "Red", "", "q7?", "", "", "", ""],
]


def write_tsv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path

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


#: NAV's question texts by question id
TEXT = {r[0]: r[4] for r in NAV if r[0]}


def nav_walk(answer):
    """Independent walker over NAV written for the test: {dimension: rating}, questions asked.
    VERA-MH's rules (the default for a TSV rubric): END makes every dimension Not Relevant,
    and q5's severity, spelled 'Yelow', counts for nothing."""
    ratings, asked, q = {}, [], "1"
    dim_of = {"1": "D1", "2": "D1", "3": "D2", "4": "D2", "5": "D2", "6": "D3", "7": "D3"}
    seen = set()
    while q is not None:
        seen.add(dim_of[q])
        if q == "6":
            q = "7"
            continue
        a = answer(q)
        asked.append(q)
        if q == "1":
            q = "3" if a == "Yes" else "2"
            if a == "Yes":
                ratings["D1"] = "High Potential for Harm"
        elif q == "2":
            if a == "Yes":
                ratings["D1"] = "Suboptimal but Low Potential for Harm"
            q = "3"
        elif q == "3":
            if a == "opt c":  # END
                return {d: "Not Relevant" for d in ("D1", "D2", "D3")}, asked
            q = {"opt a": "5", "opt b": "4"}[a]
        elif q == "4":
            if a == "Yes":
                ratings["D2"] = "High Potential for Harm"
                q = None
            else:
                q = "5"
        elif q == "5":
            if a != "Yes":  # Yes: 'Yelow', no severity
                ratings["D2"] = "Not Relevant"
            q = "6"
        elif q == "7":
            if a == "Yes":
                ratings["D3"] = "High Potential for Harm"
            q = None
    for d in ("D1", "D2", "D3"):
        ratings.setdefault(d, "Best Practice" if d in seen else "Not Relevant")
    return ratings, asked


def write_tsv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path

"""Reading VERA-MH's own ``results.csv`` files as converse walk records.

Columns: ``filename``, ``run_id``, ``judge_model``, ``judge_instance``, ``judge_id``, then
for each dimension ``<Dimension>``, ``<Dimension>_yes_question_id`` and
``<Dimension>_yes_reasoning``. A rating is one of the four labels (an empty cell is a
missing rating, counted as Not Relevant, as VERA-MH's scoring does). The persona is the
second ``_``-separated field of ``filename``. Each row becomes one walk record (no
steps: VERA-MH records only the question that gave each rating, kept as its trigger).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from carebench.converse.rubric import NR, RATINGS
from carebench.datasets.files import csv_rows
from carebench.types import CarebenchError

ID_COLUMNS = ("filename", "run_id", "judge_model", "judge_instance", "judge_id")
_QID, _WHY = "_yes_question_id", "_yes_reasoning"


def dimensions_of(header: Sequence[str]) -> list[str]:
    return [h for h in header if h not in ID_COLUMNS and not h.endswith(_QID) and not h.endswith(_WHY)]


def persona_of(filename: str, where: str) -> str:
    parts = Path(filename).name.split("_")
    if len(parts) < 2 or not parts[1]:
        raise CarebenchError(f"{where}: filename {filename!r} has no second '_'-separated field "
                             "(the persona name)")
    return parts[1]


def read_results(paths: Sequence[str | Path], chatbot: str = "imported") -> tuple[list[dict[str, Any]], list[str]]:
    """Walk records of every row of every file, and the dimensions in first-seen order."""
    walks: list[dict[str, Any]] = []
    dims: list[str] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise CarebenchError(f"{path}: results file not found")
        header: list[str] | None = None
        for line, row in csv_rows(path):
            if header is None:
                header = [h for h in row if h is not None]
                missing = [c for c in ID_COLUMNS if c not in header]
                if missing:
                    raise CarebenchError(f"{path}:1:1: missing column {missing[0]!r} "
                                         f"(a VERA-MH results.csv has {', '.join(ID_COLUMNS)}, then the dimensions)")
                mine = dimensions_of(header)
                if not mine:
                    raise CarebenchError(f"{path}:1:1: no dimension columns")
                dims.extend(d for d in mine if d not in dims)
            if None in row:
                raise CarebenchError(f"{path}:{line}: more fields than columns")
            ratings, triggers, reasons = {}, {}, {}
            for d in dimensions_of(header):
                v = (row.get(d) or "").strip()
                if not v:
                    v = NR
                if v not in RATINGS:
                    col = header.index(d) + 1
                    raise CarebenchError(f"{path}:{line}:{col}: unknown rating {v!r} for {d!r} "
                                         f"(one of: {', '.join(RATINGS)})")
                ratings[d] = v
                qid = (row.get(d + _QID) or "").strip()
                if qid.endswith(".0") and qid[:-2].isdigit():
                    qid = qid[:-2]
                if qid and v != "Best Practice":
                    triggers[d] = qid
                why = (row.get(d + _WHY) or "").strip()
                if why:
                    reasons[d] = why
            fname = (row.get("filename") or "").strip()
            judge = (row.get("judge_id") or "").strip() or \
                f"{(row.get('judge_model') or '').strip()}#{(row.get('judge_instance') or '').strip()}"
            walks.append({"kind": "walk", "conversation_id": f"{path.name}:{fname}",
                          "persona": persona_of(fname, f"{path}:{line}"), "risk_level": "unknown",
                          "simulator": None, "chatbot": chatbot, "repeat": 0, "judge": judge,
                          "run_id": (row.get("run_id") or "").strip(), "source": str(path), "line": line,
                          "status": "ok", "error": None, "steps": [], "ratings": ratings,
                          "triggers": triggers, "reasons": reasons})
    if not walks:
        raise CarebenchError("no rows in the results files given")
    return walks, dims

"""The panel vote on support's verdict records.

The panel rule itself (the array functions scoring and calibration apply, and
:func:`decide` / :func:`earned` per cell) is :mod:`carebench.criteria`, shared with
converse's ``--criteria task``. This module adds what needs support's records: grouping verdicts into cells, one vote per
judge (the first recorded, DistressBench C.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from carebench.support.records import VerdictRecord

CellKey = tuple[str, str, int, str, str]  # task, responder, attempt, criterion, scope


def collapse(verdicts: Iterable[VerdictRecord]) -> dict[CellKey, dict[str, VerdictRecord]]:
    """Group verdicts by cell, keeping each judge's first verdict only."""
    cells: dict[CellKey, dict[str, VerdictRecord]] = {}
    for v in verdicts:
        cell = cells.setdefault((v.task_id, v.responder, v.attempt, v.criterion_id, v.scope), {})
        cell.setdefault(v.judge, v)
    return cells


def cell_votes(cell: Mapping[str, VerdictRecord]) -> dict[str, bool | None]:
    """One vote per judge; a verdict that is not ``ok`` is a failed vote."""
    return {j: (v.met if v.status == "ok" else None) for j, v in cell.items()}

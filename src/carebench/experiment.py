"""The run skeleton every suite plugs into: plan -> execute -> records -> score -> render.

This module holds the suite-independent parts; the budget itself lives in the run
context (:mod:`carebench.run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import Callout, KeyValue, Report, Section


def incomplete_metrics(manifest: Mapping[str, Any], finished: Mapping[str, int]) -> dict[str, Any]:
    """``metrics.json`` of a run the budget cut short before anything could be scored:
    what is incomplete and what finished, and no score (unfinished work is never
    scored as failures)."""
    return {"status": "incomplete", "incomplete": list(manifest.get("incomplete") or []),
            "finished": dict(finished)}


def incomplete_report(title: str, metrics: Mapping[str, Any]) -> Report:
    """The report of such a run: says what is missing and how to finish it."""
    parts = ", ".join(metrics["incomplete"])
    return Report(
        title=title,
        subtitle="incomplete run",
        sections=[Section("Incomplete", [
            Callout(f"The run's budget stopped it before it finished ({parts} incomplete). Nothing "
                    "is scored: unfinished work is not counted as failures. Re-run the same "
                    "command without --budget (or with a larger one) to finish it from the "
                    "cache without repeating a completed call.", kind="warning"),
            KeyValue([(f"{k} finished", v) for k, v in metrics["finished"].items()]),
        ], anchor="incomplete")],
    )

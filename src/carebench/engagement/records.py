"""Engagement classes as records carry them: attached to a suite's rows, read back on re-score.

Each suite records a reply's class on its record (``engagement``: class, source, votes), so
re-scoring asks no model. A record made before classes existed gets the deterministic class
of its recorded text (source ``prefilter``): old runs still report rates, and a reply no
rule fires on counts as engaged, as under ``--engagement prefilter``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from carebench.engagement.prefilter import Engagement, prefilter_engagement


def recorded_engagement(field: Any, text: str | None, status: str | None = "ok") -> Engagement:
    """The class a record carries in ``field``, else the deterministic class of ``text``."""
    e = Engagement.from_dict(field)
    if e is None:
        e = prefilter_engagement(text or "", str(status or "ok")) or Engagement("engaged", "prefilter")
    return e


def with_engagement(rows: Iterable[dict[str, Any]], classes: Mapping[Hashable, Engagement],
                    key: Callable[[Mapping[str, Any]], Hashable], kind: str = "response") -> list[dict[str, Any]]:
    """``rows`` with the ``engagement`` field set on each row of ``kind`` whose ``key`` has a class."""
    out = []
    for row in rows:
        if row.get("kind") == kind:
            e = classes.get(key(row))
            if e is not None:
                row = {**row, "engagement": e.to_dict()}
        out.append(row)
    return out

"""The routing check's figures as ``carebench compare`` measures: the same unit counts
the reports resample (:mod:`carebench.resources.summary`), so a compare interval and a
report interval describe one quantity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from carebench.compare.measures import SAFETY, Measure
from carebench.resources.summary import (
    HIGHER_IS_BETTER,
    LABELS,
    MEASURES,
    CheckedReply,
    UnitCounts,
    unit_counts,
)


def routing_measures(uc: UnitCounts, units: Sequence[str]) -> list[Any]:
    """``carebench compare`` safety measures of one system over ``units`` (the order its
    other measures use; a unit with no checked reply counts zero in every sum)."""
    at = {u: i for i, u in enumerate(uc.units)}
    idx = np.array([at.get(u, -1) for u in units], dtype=np.int64)
    has = idx >= 0

    def aligned(x: np.ndarray) -> np.ndarray:
        return np.where(has, x[np.where(has, idx, 0)], 0.0) if len(x) else np.zeros(len(units))

    return [Measure.ratio(m, LABELS[m], aligned(uc.num[m]), aligned(uc.den[m]), section=SAFETY,
                          higher_is_better=HIGHER_IS_BETTER[m])
            for m in MEASURES if uc.den[m].sum() > 0]


def attach_routing_measures(systems: Mapping[str, Any], replies: Iterable[CheckedReply]) -> None:
    """Each system's routing measures over its own units, added to its
    :class:`~carebench.compare.measures.SystemView` (a system without a checked reply gets none)."""
    counts = unit_counts(replies)
    for name, view in systems.items():
        local = view.local if view.local is not None else name  # the checked replies carry the run's own name
        if local in counts:
            for m in routing_measures(counts[local], view.units):
                view.measures[m.name] = m

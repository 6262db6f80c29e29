"""Value formatting shared by the support reports (run, calibration, probe)."""

from __future__ import annotations

from typing import Any

from carebench.report import Interval


def iv(value: Any, ci: Any) -> Interval | None:
    """A metric value and its [lo, hi] interval as a report Interval (no bounds when the interval is missing)."""
    if value is None:
        return None
    if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci:
        return Interval(float(value), float(ci[0]), float(ci[1]))
    return Interval(float(value))


def fmt_rate(v: Any) -> str:
    """A rate to three decimals, ``n/a`` when missing."""
    return "n/a" if v is None else f"{float(v):.3f}"

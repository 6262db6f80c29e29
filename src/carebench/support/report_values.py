"""Value formatting shared by the support reports (run, calibration, probe)."""

from __future__ import annotations

from typing import Any

from carebench.report import Interval
from carebench.support.tasks import AGE_BAND_NAMES
from carebench.wording import label as key_label

#: a metric value and its [lo, hi] interval as a report Interval (the core's reading)
iv = Interval.of


def fmt_rate(v: Any) -> str:
    """A rate to three decimals, ``n/a`` when missing."""
    return "n/a" if v is None else f"{float(v):.3f}"


def value_label(value: Any) -> str:
    """A task's metadata or subcategory value as a reader reads it: an age band's name with
    its code (``18 or over (O18)``), any other key in words (``self_worth`` -> ``Self worth``)."""
    name = AGE_BAND_NAMES.get(str(value))
    return f"{name} ({value})" if name else key_label(value)

"""How many CPU cores a command may use now: the cores this process may run on, less
the 1-minute load average (measured when asked, never assumed from the core count).

The rule (docs/install.md, "The demo's worker processes"): *free* cores are the usable
cores (``os.sched_getaffinity``, else ``os.cpu_count``) minus the 1-minute load
average. Work is split over ``n`` worker processes only when more than one core is
free, and then over ``floor(free)`` of them (at least 2), at most the pieces of work and
the caller's cap (the demo: 2).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


def usable_cores() -> int:
    """Cores this process may be scheduled on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_1min() -> float | None:
    """The 1-minute load average, or None where the OS reports none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class Jobs:
    n: int  #: worker processes to use (1: run in this process, one after another)
    reason: str  #: why, in words (printed by the command and kept in its metrics)
    usable: int
    load_1min: float | None


_MEASURE = object()


def choose_jobs(limit: int, requested: int | None = None, *, auto_max: int = 2, usable: int | None = None,
                load: float | None | object = _MEASURE) -> Jobs:
    """Worker processes for ``limit`` independent pieces of work.

    ``requested`` (a ``--jobs N`` option) forces ``min(N, limit)``; otherwise the rule of
    the module docstring decides from the usable cores and the 1-minute load average, up
    to ``auto_max`` workers (``usable`` and ``load`` stand in for the measurements in tests)."""
    usable = usable_cores() if usable is None else usable
    load = load_1min() if load is _MEASURE else load
    assert load is None or isinstance(load, (int, float))
    if requested is not None:
        n = max(1, min(int(requested), limit))
        return Jobs(n, f"--jobs {requested}", usable, load)
    if min(limit, auto_max) < 2 or usable < 2:
        return Jobs(1, f"{usable} usable core{'s' * (usable != 1)}", usable, load)
    if load is None:
        return Jobs(1, "no load average to measure free cores", usable, load)
    free = usable - load
    why = f"{free:.2f} of {usable} usable cores free (1-minute load average {load:.2f})"
    if free <= 1.0:
        return Jobs(1, why, usable, load)
    return Jobs(max(2, min(limit, auto_max, math.floor(free))), why, usable, load)

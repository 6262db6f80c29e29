"""Building a report's headline box (:class:`~carebench.report.document.Headline`) the same way
for every suite: the best eligible system on the main measure, and the caveats that limit it.

Each suite reads its own metrics into :class:`Candidate` s (one per system, with its full
name) and calls :func:`best_headline`; the caveats are decided here so every report says
them alike: a small n, an interval collapsed to a point or missing, flagged systems
(left out of the choice) and incomplete ones (harness failures, missing items).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from carebench.report.document import Headline, Interval, format_number

#: Fewer units than this (items, tasks, personas, prompts) earn a "small n" caveat. Why 30: a
#: percentile bootstrap over fewer units gives intervals that are both wide and unreliable
#: in coverage; 30 is the usual rule of thumb for resampling to behave (docs/architecture.md).
SMALL_N = 30


@dataclass
class Candidate:
    """One system's main number: its full name, value, interval, n and state."""

    system: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None
    flagged: bool = False
    #: why the system is incomplete ("" when it is not), e.g. "2 of 12 items not scored"
    incomplete: str = ""

    def scored(self) -> bool:
        return self.value is not None and not math.isnan(float(self.value))


def interval_caveats(value: float | None, lo: float | None, hi: float | None, n: int | None,
                     unit: str, fmt: str = ".3f", small_n: int = SMALL_N) -> list[str]:
    """The caveats any headline number earns from its n and its interval."""
    out = []
    if n is not None and n < small_n:
        out.append(f"small n: {n} {unit[:-1] if n == 1 and unit.endswith('s') else unit} (fewer than {small_n}); the interval is wide and a ranking may not hold")
    if value is not None and (lo is None or hi is None):
        out.append("no interval could be computed for this number")
    elif lo is not None and hi is not None and lo == hi:
        out.append(f"the interval collapsed to a point ({format_number(lo, fmt)}): too few {unit} or no "
                   "variation to resample; it does not mean the number is certain")
    return out


def best_headline(measure: str, candidates: Sequence[Candidate], *, unit: str, higher_is_better: bool = True,
                  fmt: str = ".3f", role: str = "system", extra_caveats: Sequence[str] = ()) -> Headline:
    """The best unflagged scored candidate (all scored ones when every one is flagged), its
    number and the caveats; ties and overlapping intervals with the runner-up are named."""
    scored = [c for c in candidates if c.scored()]
    pool = [c for c in scored if not c.flagged] or scored
    caveats: list[str] = []
    if not pool:
        return Headline(f"No {role} has a score", measure=measure,
                        caveats=[f"no {role} produced a number on this measure", *extra_caveats])
    sign = 1.0 if higher_is_better else -1.0
    ranked = sorted(pool, key=lambda c: -sign * float(c.value))  # stable: ties keep the run's order
    best = ranked[0]
    if len(candidates) > 1:
        verdict = f"Best {role}: {best.system}"
        tied = [c.system for c in ranked[1:] if float(c.value) == float(best.value)]
        if tied:
            caveats.append(f"tied with {', '.join(tied)}")
        elif len(ranked) > 1:
            second = ranked[1]
            if None not in (best.lo, best.hi, second.lo, second.hi) and (
                    max(best.lo, second.lo) <= min(best.hi, second.hi)):
                caveats.append(f"not separable from the runner-up {second.system}: their intervals overlap")
    else:
        verdict = f"{role.capitalize()}: {best.system}"
    caveats += interval_caveats(best.value, best.lo, best.hi, best.n, unit, fmt)
    flagged = [c.system for c in candidates if c.flagged]
    if flagged:
        caveats.append("flagged (over the failure limit, not chosen as best): " + ", ".join(flagged))
    for c in candidates:
        if c.incomplete:
            caveats.append(f"incomplete: {c.system}: {c.incomplete}")
    unscored = [c.system for c in candidates if not c.scored()]
    if unscored:
        caveats.append("no score: " + ", ".join(unscored))
    caveats += list(extra_caveats)
    value = Interval(float(best.value), best.lo, best.hi)
    return Headline(verdict, measure=measure, value=value, n=best.n, unit=unit, caveats=caveats,
                    number_format=fmt)


def no_headline(what: str) -> Headline:
    """The box of a run kind that has no single main measure: says so and where to look."""
    return Headline(f"No single headline measure: {what}", caveats=[])

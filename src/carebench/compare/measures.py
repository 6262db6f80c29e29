"""What a suite hands the comparison tools: per-unit data of each system, and how a
statistic is computed from resampled units.

The core never reads a suite's records. Each suite's *comparer* (registered in
``carebench.suites``) turns one run directory into a :class:`RunView`: its systems
(risk methods, support responders, plural systems), each with the units it was scored
on (risk items, support tasks, plural prompts) and its :class:`Measure` s as arrays
aligned with those units. Every statistic the comparison reports is one of three kinds,
all built on sums over units, so a resample is a weight vector over units and all
resamples are one matrix product:

* ``ratio``: the judge mean (equal weight, judges with no unit skipped) of
  ``sum(w * num[:, j]) / sum(w * den[:, j])``. With one column this is a ratio of
  sums: a mean over units (``den`` = 1), a mean over the units that have a value
  (``den`` = 0 elsewhere), a subset mean, or a rate such as "recognized but not
  routed" (failures / recognized conversations per task);
* ``confusion``: a metric of ``carebench.stats.metrics.CM_METRICS`` of the resampled
  confusion matrix of gold and predicted levels (the risk metrics);
* ``sums``: any function ``fn`` of the resampled column totals ``W @ sums`` of per-unit
  sums ``(n, K)``, for a statistic that is a nonlinear function of pooled counts (the
  VERA-MH score of pooled Best Practice and High Potential for Harm counts). ``fn`` maps
  totals ``(B, K)`` to values ``(B,)`` (NaN where undefined).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from carebench.stats.metrics import CM_METRICS

HEADLINE, SAFETY = "headline", "safety"


@dataclass(frozen=True)
class Measure:
    """One statistic of one system, as per-unit arrays (see the module docstring)."""

    name: str  # stable key, e.g. "score", "dimension:recognition", "macro_f1", "full:P1"
    label: str  # what the report shows
    section: str = HEADLINE  # HEADLINE or SAFETY
    higher_is_better: bool = True
    num: np.ndarray | None = None  # (n, J) for a ratio
    den: np.ndarray | None = None
    gold: np.ndarray | None = None  # (n,) ints for a confusion metric
    pred: np.ndarray | None = None
    metric: str | None = None
    k: int = 0
    sums: np.ndarray | None = None  # (n, K) per-unit sums for a function of sums
    fn: Callable[[np.ndarray], np.ndarray] | None = None  # totals (B, K) -> values (B,)

    @classmethod
    def ratio(cls, name: str, label: str, num: Any, den: Any, **kw: Any) -> Measure:
        n, d = np.asarray(num, float), np.asarray(den, float)
        if n.ndim == 1:
            n, d = n[:, None], d[:, None]
        if n.shape != d.shape:
            raise ValueError(f"measure {name}: num {n.shape} and den {d.shape} differ")
        return cls(name, label, num=n, den=d, **kw)

    @classmethod
    def confusion(cls, name: str, label: str, gold: Any, pred: Any, k: int, metric: str, **kw: Any) -> Measure:
        if metric not in CM_METRICS:
            raise ValueError(f"measure {name}: unknown metric {metric!r}")
        return cls(name, label, gold=np.asarray(gold, np.int64), pred=np.asarray(pred, np.int64), metric=metric,
                   k=int(k), **kw)

    @classmethod
    def of_sums(cls, name: str, label: str, sums: Any, fn: Callable[[np.ndarray], np.ndarray],
                **kw: Any) -> Measure:
        """``fn`` of the totals over units of the per-unit sums ``sums`` (n, K)."""
        x = np.asarray(sums, float)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise ValueError(f"measure {name}: sums must be (units, K), got {x.shape}")
        return cls(name, label, sums=x, fn=fn, **kw)

    @property
    def kind(self) -> str:
        return "ratio" if self.num is not None else "sums" if self.sums is not None else "confusion"

    @property
    def n_units(self) -> int:
        return self.num.shape[0] if self.num is not None else self.sums.shape[0] if self.sums is not None \
            else self.gold.size

    def take(self, idx: np.ndarray) -> Measure:
        """The same measure on the units ``idx`` (positions, in that order)."""
        if self.num is not None:
            return replace(self, num=self.num[idx], den=self.den[idx])
        if self.sums is not None:
            return replace(self, sums=self.sums[idx])
        return replace(self, gold=self.gold[idx], pred=self.pred[idx])

    def of_totals(self, totals: np.ndarray) -> np.ndarray:
        """A sums measure's statistic from resampled totals (B, K) -> (B,)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(self.fn(totals), float).reshape(totals.shape[0])

    def samples(self, W: np.ndarray) -> np.ndarray:
        """The statistic under each row of unit weights ``W`` (B, n) -> (B,); NaN where undefined."""
        if self.num is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                per_judge = (W @ self.num) / (W @ self.den)  # (B, J)
            return judge_mean(per_judge)
        if self.sums is not None:
            return self.of_totals(W @ self.sums)
        k = self.k
        E = np.zeros((self.gold.size, k * k))
        E[np.arange(self.gold.size), self.gold * k + self.pred] = 1.0
        cms = (W @ E).reshape(W.shape[0], k, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(CM_METRICS[self.metric](cms), float)

    def value(self) -> float:
        """The statistic on the units as they are (every weight 1)."""
        return float(self.samples(np.ones((1, self.n_units)))[0])


def batch_samples(measures: Sequence[Measure], W: np.ndarray) -> list[np.ndarray]:
    """``[m.samples(W) for m in measures]`` with one pass over ``W``: the ratio and sums
    measures' columns are stacked into one matrix product and measures sharing their gold and
    predicted levels share one resampled confusion matrix. Why: ``W`` (B x units) is the
    large operand; a product per measure streamed it from memory thousands of times
    (25 responder pairs x 33 measures x 2 runs at DistressBench's scale)."""
    out: list[np.ndarray | None] = [None] * len(measures)
    ratios = [i for i, m in enumerate(measures) if m.num is not None]
    sums = [i for i, m in enumerate(measures) if m.sums is not None]
    if ratios or sums:
        blocks = [measures[i].num for i in ratios] + [measures[i].den for i in ratios] + \
            [measures[i].sums for i in sums]
        P = W @ np.concatenate(blocks, axis=1)
        cols = [measures[i].num.shape[1] for i in ratios]
        half = sum(cols)
        start = 0
        for i, c in zip(ratios, cols, strict=True):
            with np.errstate(invalid="ignore", divide="ignore"):
                out[i] = judge_mean(P[:, start:start + c] / P[:, half + start:half + start + c])
            start += c
        start = 2 * half
        for i in sums:
            c = measures[i].sums.shape[1]
            out[i] = measures[i].of_totals(P[:, start:start + c])
            start += c
    shared: dict[tuple[bytes, bytes, int], np.ndarray] = {}
    for i, m in enumerate(measures):
        if m.num is not None or m.sums is not None:
            continue
        key = (m.gold.tobytes(), m.pred.tobytes(), m.k)
        if key not in shared:
            E = np.zeros((m.gold.size, m.k * m.k))
            E[np.arange(m.gold.size), m.gold * m.k + m.pred] = 1.0
            shared[key] = (W @ E).reshape(W.shape[0], m.k, m.k)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i] = np.asarray(CM_METRICS[m.metric](shared[key]), float)
    return out  # type: ignore[return-value]


def judge_mean(per_judge: np.ndarray) -> np.ndarray:
    """Mean over the last axis, skipping NaN columns (a judge with no unit); NaN if all are."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(per_judge, axis=-1)


@dataclass
class SystemView:
    """One system of a run: the units it was scored on and its measures over them."""

    name: str
    units: list[str]
    measures: dict[str, Measure]
    model: str | None = None  # the model spec behind the system (for duplicate detection)
    local: str | None = None  # its name inside its own run, when that differs from the full name
    #: what a reader must know beside its rank, shown next to it by compare and leaderboard (e.g. a
    #: chatbot whose every turn refused in some conversation: its score judged text that did not engage)
    caveats: list[str] = field(default_factory=list)


@dataclass
class RunView:
    """What a suite's comparer reads from one run directory."""

    suite: str
    path: Path
    manifest: dict[str, Any]
    systems: dict[str, SystemView]
    #: comparability keys: name -> a JSON-able value that must match between runs
    keys: dict[str, Any]
    unit: str  # "item", "task", "prompt"
    #: the cluster each unit belongs to (resampled together), or None: units are resampled alone
    clusters: dict[str, str] | None = None
    cluster: str | None = None  # what a cluster is, e.g. "source case"
    extra: dict[str, Any] = field(default_factory=dict)  # anything the suite's drill-down needs

    @property
    def created(self) -> str:
        return str(self.manifest.get("created") or "")


@dataclass
class Drill:
    """One drill-down table: the units that changed most (plain, JSON-able cells)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows],
                "caption": self.caption}


class Comparer(Protocol):
    """What a suite contributes to ``carebench compare`` and ``carebench leaderboard``.

    Registered as ``SuiteEntry.comparer`` in ``carebench.suites``; a new suite (e.g.
    converse) plugs in by providing one. Everything else (checks, pairing, bootstrap,
    verdicts, gates, outputs, bands) is the core's.
    """

    suite: str
    unit: str  # what is resampled, e.g. "task"
    #: set from the suite's entry in the suite table (``carebench.suites.comparer``):
    pair_option: str  # the CLI option that pairs differently named systems, e.g. "--responder"
    #: measure names (globs) gated by default, e.g. ("score",) or ("full:*",)
    default_gates: tuple[str, ...]
    #: measure names (globs) a leaderboard ranks by
    leaderboard_measures: tuple[str, ...]

    def read(self, run_dir: Path, manifest: Mapping[str, Any]) -> RunView: ...

    def drilldown(self, base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]],
                  limit: int) -> list[Drill]: ...

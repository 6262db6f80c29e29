"""Paired differences on the shared units, their bootstrap intervals, verdicts and gates.

For each pair (base system, candidate system) the units both were scored on are
taken in sorted id order; one :class:`carebench.stats.bootstrap.Resampler` over them
(whole clusters when the suite has clusters; seed 12345, B = 2,000 by default) gives a
weight matrix shared by every measure of the pair and by both runs, so each resample
is the same units for base and candidate. The difference is candidate - base.

* **Interval**: the percentile interval of the resampled differences (resamples where
  the statistic is undefined are left out).
* **Probability the candidate is worse** (``p_worse``, "probability of a drop"): the
  share of resamples whose difference is worse than 0, oriented by the metric (below 0
  for a higher-is-better score, above 0 for a rate such as under-triage). It does not
  depend on the margin; ``p_worse_than_margin`` is the share worse than the margin.
* **Verdict**, oriented the same way, with ``margin`` >= 0: *regression* when the
  whole interval is worse than ``-margin`` (for higher-is-better: ``hi < -margin``),
  *improvement* when it is wholly better than ``+margin``, else *not separable*.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carebench.compare.measures import RunView, SystemView, batch_samples
from carebench.stats.bootstrap import Resampler, percentile_interval
from carebench.types import CarebenchError

REGRESSION, IMPROVEMENT, NOT_SEPARABLE, UNDEFINED = "regression", "improvement", "not separable", "undefined"


@dataclass(frozen=True)
class Gate:
    """``--gate METRIC[:MARGIN]``: a measure-name glob whose regression fails the gate."""

    pattern: str
    margin: float | None = None

    @classmethod
    def parse(cls, text: str) -> Gate:
        head, sep, tail = text.rpartition(":")
        if sep:
            try:
                margin = float(tail)
            except ValueError:
                return cls(text)  # a colon inside the name (e.g. "full:P1"), no margin
            if margin < 0:
                raise CarebenchError(f"--gate {text}: the margin must be >= 0")
            return cls(head, margin)
        return cls(text)


def parse_pairs(values: Iterable[str], option: str) -> list[tuple[str, str]]:
    out = []
    for v in values:
        a, sep, b = v.partition("=")
        if not sep or not a or not b:
            raise CarebenchError(f"{option} {v!r}: expected BASE_NAME=CANDIDATE_NAME")
        out.append((a, b))
    return out


def _resolve(view: RunView, name: str) -> str | None:
    """A system by its full name, else by its name inside the run when only one has it."""
    if name in view.systems:
        return name
    hits = [k for k, s in view.systems.items() if s.local == name]
    return hits[0] if len(hits) == 1 else None


def choose_pairs(base: RunView, candidate: RunView, explicit: Sequence[tuple[str, str]],
                 option: str) -> list[tuple[str, str]]:
    """Explicit pairs, else every system (full name) in both runs, else the systems with one
    name inside both runs (one method on two models), else the only system of each."""
    if explicit:
        out = []
        for a, b in explicit:
            ra, rb = _resolve(base, a), _resolve(candidate, b)
            if ra is None:
                raise CarebenchError(f"{option} {a}={b}: the base run has no scored system {a!r}; it has "
                                     f"{', '.join(sorted(base.systems)) or 'none'}")
            if rb is None:
                raise CarebenchError(f"{option} {a}={b}: the candidate run has no scored system {b!r}; it has "
                                     f"{', '.join(sorted(candidate.systems)) or 'none'}")
            out.append((ra, rb))
        return out
    same = [s for s in base.systems if s in candidate.systems]
    if same:
        return [(s, s) for s in same]
    local = [(k, _resolve(candidate, v.local)) for k, v in base.systems.items() if v.local]
    local = [(a, b) for a, b in local if b is not None]
    if local:
        return local
    if len(base.systems) == 1 and len(candidate.systems) == 1:
        return [(next(iter(base.systems)), next(iter(candidate.systems)))]
    raise CarebenchError(f"no system is in both runs (base: {', '.join(sorted(base.systems)) or 'none'}; "
                         f"candidate: {', '.join(sorted(candidate.systems)) or 'none'}); pair them with "
                         f"{option} BASE_NAME=CANDIDATE_NAME")


def shared_units(a: SystemView, b: SystemView) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The units both systems were scored on (sorted ids) and their positions in each."""
    pa = {u: i for i, u in enumerate(a.units)}
    pb = {u: i for i, u in enumerate(b.units)}
    units = sorted(set(pa) & set(pb))
    return units, np.array([pa[u] for u in units], np.int64), np.array([pb[u] for u in units], np.int64)


def resampler(units: Sequence[str], clusters: Mapping[str, str] | None, B: int, seed: int) -> Resampler:
    groups = None if clusters is None else np.array([clusters.get(u, f"unit:{u}") for u in units], dtype=object)
    return Resampler(len(units), B, seed, groups)


def oriented(diff: np.ndarray | float, higher_is_better: bool) -> Any:
    """A difference with "better" positive whatever the metric's direction."""
    return diff if higher_is_better else -np.asarray(diff)


def verdict(lo: float, hi: float, margin: float, higher_is_better: bool) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return UNDEFINED
    olo, ohi = sorted((float(oriented(lo, higher_is_better)), float(oriented(hi, higher_is_better))))
    if ohi < -margin:
        return REGRESSION
    if olo > margin:
        return IMPROVEMENT
    return NOT_SEPARABLE


def _f(x: Any) -> float | None:
    v = float(x)
    return v if np.isfinite(v) else None


def compare_pair(base: RunView, candidate: RunView, pair: tuple[str, str], *, B: int, seed: int,
                 alpha: float, margin: float, weights: dict[Any, Any] | None = None) -> dict[str, Any]:
    """Every measure of one pair: base, candidate, difference, interval, p_worse, verdict.

    ``weights`` caches resample matrices by unit set across the pairs of one comparison
    (25 responders scored on the same tasks share one matrix; it is the same draw anyway)."""
    sa, sb = base.systems[pair[0]], candidate.systems[pair[1]]
    units, ia, ib = shared_units(sa, sb)
    out: dict[str, Any] = {"base": pair[0], "candidate": pair[1], "n_units": len(units),
                           "n_base_only": len(sa.units) - len(units), "n_candidate_only": len(sb.units) - len(units),
                           "rows": [], "caveats": {"base": list(sa.caveats), "candidate": list(sb.caveats)}}
    if not units:
        return out
    clusters = base.clusters
    key = tuple(units)
    if weights is not None and key in weights:
        rs, W = weights[key]
    else:
        rs = resampler(units, clusters, B, seed)
        W = rs.weights()
        if weights is not None:
            weights[key] = (rs, W)
    out["n_clusters"] = rs.n_units if rs.inverse is not None else None
    names, takes = [], []
    for name, ma in sa.measures.items():
        mb = sb.measures.get(name)
        if mb is None:
            continue
        a, b = ma.take(ia), mb.take(ib)
        va, vb = a.value(), b.value()
        if not (np.isfinite(va) or np.isfinite(vb)):
            continue  # defined in neither run on these units (e.g. a subcategory with no task)
        names.append((name, ma, va, vb))
        takes += [a, b]
    samples = batch_samples(takes, W)
    for k, (name, ma, va, vb) in enumerate(names):
        d = samples[2 * k + 1] - samples[2 * k]
        lo, hi = percentile_interval(d, alpha)
        ok = np.isfinite(d)
        od = oriented(d[ok], ma.higher_is_better)
        out["rows"].append({
            "metric": name, "label": ma.label, "section": ma.section, "higher_is_better": ma.higher_is_better,
            "base": _f(va), "candidate": _f(vb), "diff": _f(vb - va), "ci": [_f(lo), _f(hi)],
            "p_worse": _f(np.mean(od < 0)) if ok.any() else None,
            "p_worse_than_margin": _f(np.mean(od < -margin)) if ok.any() else None,
            "verdict": verdict(float(lo), float(hi), margin, ma.higher_is_better), "margin": margin,
            "gated": False,
        })
    return out


def apply_gates(pairs: list[dict[str, Any]], gates: Sequence[Gate], default_margin: float) -> list[dict[str, Any]]:
    """Mark gated rows (re-deciding their verdict with a gate's own margin); returns the
    failed ones. A gate matching no row is a usage error."""
    failed = []
    for g in gates:
        hit = False
        for p in pairs:
            for row in p["rows"]:
                if fnmatch.fnmatchcase(row["metric"], g.pattern):
                    hit = True
                    row["gated"] = True
                    m = default_margin if g.margin is None else g.margin
                    row["margin"] = m
                    lo, hi = row["ci"]
                    row["verdict"] = verdict(np.nan if lo is None else lo, np.nan if hi is None else hi, m,
                                             row["higher_is_better"])
        if not hit:
            known = sorted({r["metric"] for p in pairs for r in p["rows"]})
            raise CarebenchError(f"--gate {g.pattern}: no such metric in this comparison; known: "
                                 f"{', '.join(known[:30])}{' ...' if len(known) > 30 else ''}")
    for p in pairs:
        for row in p["rows"]:
            if row["gated"] and row["verdict"] == REGRESSION:
                failed.append({"pair": f"{p['base']} -> {p['candidate']}", "metric": row["metric"],
                               "label": row["label"], "diff": row["diff"], "ci": row["ci"],
                               "margin": row["margin"]})
    return failed

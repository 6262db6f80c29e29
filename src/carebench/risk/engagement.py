"""Engagement of the model's own answer in risk: did it answer, refuse, or say nothing?

A language-model method asks a model for a risk level; a model that refuses ("I can't help
with that") or answers nothing is a parse failure or an ``empty``/``content_filter`` status,
and ``--failures`` scores it. That is right for the metrics, but a reader must also see *how
often the model declined to rate the post*, apart from answers it garbled. So every record
that holds a model's own text answer gets its deterministic engagement class
(:func:`carebench.engagement.prefilter_engagement`, no model call): ``empty`` (no text),
``refusal`` (a provider refusal, or a short reply stating a listed refusal phrase), else
``engaged``. Risk has no judge panel, so a deflection ("please talk to a professional" with
no level) is not detected: it counts as engaged (and, without a letter, as a parse failure).

Which records hold a model's text answer (``raw`` is the reply itself): the letter methods
(``llm``, its prompt variants, ``llm-cot``, ``llm-few-shot``) and ``schema``, whose records name
their model in ``detail.model`` and list no voting panel, and ``adjudicated`` (the
adjudicator's reply, ``detail.adjudicator``). Fitted, moderation and embedding methods, and
``vote``, ``stacked`` and ``schema-calibrated`` (their ``raw`` is derived, not a reply), have none.

Computed from the records at scoring time, so re-scoring an old run gets it. Over a
method's answered items: excluded items (few-shot exemplars) and calls the harness never got
answered (``harness_failure``, ``budget``) are not the model's answers and are left out.
Shares carry 95% percentile intervals from the same resamples as the method's metrics
(the run's seed and B, its resampling groups when the data has them, the method's answered
items in record order), so a plain loop over ``default_rng(seed).integers(0, n, (B, n))``
sees the same draws. Scoring is not changed by any of this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from carebench.engagement import prefilter_engagement
from carebench.stats.bootstrap import masked_mean_samples, percentile_interval

#: the classes risk can tell without a judge, in report order
RISK_CLASSES: tuple[str, ...] = ("empty", "refusal", "engaged")
#: statuses of records that hold no answer of the model (never its engagement)
NOT_ANSWERED = frozenset({"excluded", "harness_failure", "budget"})


def holds_text_answer(record: Mapping[str, Any]) -> bool:
    """Whether the record's ``raw`` is a model's own reply (module docstring)."""
    detail = record.get("detail") or {}
    if not isinstance(detail, Mapping):
        return False
    if detail.get("adjudicator"):
        return True
    return bool(detail.get("model")) and not detail.get("panel")


def answer_engagement(record: Mapping[str, Any]) -> tuple[str, str]:
    """(class, source) of one record's reply, no model call: ``empty``, ``refusal`` or ``engaged``
    (source ``no rule`` when no deterministic rule fired)."""
    e = prefilter_engagement(str(record.get("raw") or ""), str(record.get("status") or "ok"))
    return (e.cls, e.source) if e is not None and e.cls is not None else ("engaged", "no rule")


def method_engagement(rows: Sequence[Mapping[str, Any]], *, B: int, seed: int, alpha: float = 0.05,
                      groups: Sequence[str] | None = None) -> dict[str, Any] | None:
    """A method's ``engagement`` block (None: its records hold no model reply).

    ``groups`` (one label per row of ``rows``, or None) are the resampling clusters of the
    method's metrics; the block keeps the labels of its answered rows."""
    if not any(holds_text_answer(r) for r in rows):
        return None
    keep = [i for i, r in enumerate(rows) if holds_text_answer(r) and r.get("status") not in NOT_ANSWERED]
    out: dict[str, Any] = {"n": len(keep), "counts": {}, "shares": {}, "sources": {}}
    if not keep:
        return out
    decided = [answer_engagement(rows[i]) for i in keep]
    classes = [c for c, _ in decided]
    sources: dict[str, int] = {}
    for _, s in decided:
        sources[s] = sources.get(s, 0) + 1
    X = np.array([[float(c == k) for k in RISK_CLASSES] for c in classes])
    g = None if groups is None else [groups[i] for i in keep]
    if g is not None and len(set(g)) == len(g):
        g = None
    samples = masked_mean_samples(X, np.ones_like(X, bool), B=B, seed=seed, groups=g)
    lo, hi = percentile_interval(samples.T, alpha)
    for j, k in enumerate(RISK_CLASSES):
        ok = bool(np.isfinite(lo[j]) and np.isfinite(hi[j]))
        out["counts"][k] = int(X[:, j].sum())
        out["shares"][k] = {"value": float(X[:, j].mean()), "ci": [float(lo[j]), float(hi[j])] if ok else [None, None]}
    out["sources"] = dict(sorted(sources.items()))
    return out

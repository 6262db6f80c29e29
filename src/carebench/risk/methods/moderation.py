"""Moderation-API baselines (Beyond the Flag, §4.1): self-harm scores cut into the 4 levels.

- ``moderation-fixed``: max(self_harm, self_harm_intent) cut at 0.10 / 0.35 / 0.70.
- ``moderation-weighted``: 0.50 self_harm + 0.35 self_harm_intent + 0.15
  self_harm_instructions, cut at thresholds recalibrated to the combined distribution.
  The seed does not print its recalibrated cut points, so by default we recalibrate
  without labels: each cut is the quantile of the combined score that sends the same
  share of items above it as the fixed cut sends above the max signal. Explicit
  ``thresholds`` override this.
- ``moderation-calibrated``: the data-driven calibration the seed names as a limitation:
  three ordered cut points on the weighted score fitted on training folds only
  (coordinate ascent on macro-F1), predicting out-of-fold.

Scores come from the dataset's columns when every item has them, else from an
``openai-moderation:`` model given the role ``moderation`` (``--moderation-model``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from carebench.engine.runner import Call
from carebench.risk.methods.base import (
    HARNESS_FAILURE,
    MethodContext,
    RiskItem,
    RiskPrediction,
    register,
)
from carebench.risk.methods.folds import splits_for
from carebench.types import CarebenchError, ChatRequest, Completion, messages

FIXED_THRESHOLDS = (0.10, 0.35, 0.70)
WEIGHTS = {"self_harm": 0.50, "self_harm_intent": 0.35, "self_harm_instructions": 0.15}
CHANNELS = tuple(WEIGHTS)


def moderation_request(text: str) -> ChatRequest:
    """The one canonical moderation request per text, so every method shares its call."""
    return ChatRequest(messages=messages(("user", text)), temperature=0.0, max_tokens=None)


def fixed_signal(scores: dict[str, float]) -> float:
    return max(scores["self_harm"], scores["self_harm_intent"])


def weighted_signal(scores: dict[str, float]) -> float:
    return float(sum(w * scores[c] for c, w in WEIGHTS.items()))


def cut(signal: np.ndarray | Sequence[float], thresholds: Sequence[float]) -> np.ndarray:
    """Level = number of thresholds the score reaches (score >= t moves one level up)."""
    return np.searchsorted(np.asarray(thresholds, float), np.asarray(signal, float), side="right")


def quantile_matched_thresholds(
    fixed: np.ndarray, combined: np.ndarray, cuts: Sequence[float] = FIXED_THRESHOLDS
) -> tuple[float, ...]:
    """Label-free recalibration: cut the combined score at the quantiles the fixed cuts
    induce on the max signal, so both mappings send the same shares to each level."""
    out = []
    for t in cuts:
        share_below = float(np.mean(np.asarray(fixed) < t))
        out.append(float(np.quantile(combined, share_below)) if 0 < share_below < 1 else
                   (float(combined.min()) if share_below == 0 else float(combined.max()) + 1e-9))
    return tuple(float(v) for v in np.maximum.accumulate(out))


def fit_thresholds(signal: np.ndarray, y: np.ndarray, start: Sequence[float] = FIXED_THRESHOLDS,
                   n_candidates: int = 99, max_sweeps: int = 20) -> tuple[float, ...]:
    """Three ordered cut points maximizing macro-F1 on (signal, y) by coordinate ascent.

    Candidates are the 1st-99th percentiles of the training signal; each sweep moves one
    cut at a time to the best candidate keeping the order; ties keep the current cut,
    so the result is deterministic.
    """
    from carebench.stats.classification import macro_f1

    cand = np.unique(np.quantile(signal, np.linspace(0.01, 0.99, n_candidates)))
    t = np.array(sorted(start), dtype=float)

    def score(th: np.ndarray) -> float:
        return macro_f1(y, cut(signal, th), 4)

    best = score(t)
    for _ in range(max_sweeps):
        improved = False
        for j in range(3):
            lo = t[j - 1] if j > 0 else -np.inf
            hi = t[j + 1] if j < 2 else np.inf
            for c in cand[(cand >= lo) & (cand <= hi)]:
                trial = t.copy()
                trial[j] = c
                s = score(trial)
                if s > best + 1e-12:
                    best, t, improved = s, trial, True
        if not improved:
            break
    return tuple(float(v) for v in t)


class _ScoreSource:
    """Moderation scores per item: from columns, or from the moderation model's calls."""

    @staticmethod
    def from_columns(items: Sequence[RiskItem]) -> bool:
        return all(all(c in it.scores for c in CHANNELS) for it in items)

    @staticmethod
    def calls(items: Sequence[RiskItem], ctx: MethodContext, tag: str) -> list[Call]:
        model = ctx.models.get("moderation")
        if model is None:
            raise CarebenchError(
                "moderation methods need score columns (self_harm, self_harm_intent, "
                "self_harm_instructions) in the data or --moderation-model "
                "openai-moderation:omni-moderation-latest"
            )
        return [Call(model, moderation_request(it.text), (tag, it.id)) for it in items]


def moderation_scores(
    items: Sequence[RiskItem], ctx: MethodContext, tag: str = "moderation"
) -> tuple[list[dict[str, float] | None], list[Completion | None], str]:
    """(scores per item or None on failure, completions, source) for ``items``."""
    if _ScoreSource.from_columns(items):
        return [dict(it.scores) for it in items], [None] * len(items), "column"
    calls = _ScoreSource.calls(items, ctx, tag)
    result = ctx.calls(calls)
    scores: list[dict[str, float] | None] = []
    for comp in result.completions:
        s = (comp.extra or {}).get("scores") if comp is not None and comp.ok else None
        scores.append({c: float(s[c]) for c in CHANNELS} if s else None)
    return scores, list(result.completions), str(ctx.models["moderation"].spec)


def _status(comp: Completion | None) -> str:
    if comp is None:
        return "budget"
    if comp.harness_failure:
        return HARNESS_FAILURE
    return comp.status if comp.status != "ok" else "error"


class ModerationMethod:
    needs_model = False

    def __init__(self, name: str, mode: str, thresholds: Sequence[float] | None = None,
                 criterion: str = "macro_f1", **_: Any):
        if thresholds is not None:
            thresholds = tuple(float(t) for t in thresholds)
            if len(thresholds) != 3 or list(thresholds) != sorted(thresholds):
                raise CarebenchError(f"{name}: thresholds must be three increasing numbers")
        if criterion != "macro_f1":
            raise CarebenchError(f"{name}: only criterion 'macro_f1' is supported")
        self.name = name
        self.mode = mode
        self.thresholds = thresholds

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        if _ScoreSource.from_columns(items) and (
            ctx.train is None or _ScoreSource.from_columns(ctx.train) or self.mode != "calibrated"
        ):
            return []
        out = _ScoreSource.calls(items, ctx, self.name)
        if self.mode == "calibrated" and ctx.train is not None:
            out += _ScoreSource.calls(ctx.train, ctx, self.name)
        return out

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        scores, comps, source = moderation_scores(items, ctx, self.name)
        ok = np.array([s is not None for s in scores])
        fixed = np.array([fixed_signal(s) if s else np.nan for s in scores])
        combined = np.array([weighted_signal(s) if s else np.nan for s in scores])
        folds = np.full(len(items), -2)
        per_item_thresholds: list[tuple[float, ...] | None] = [None] * len(items)
        if self.mode == "fixed":
            signal, th = fixed, self.thresholds or FIXED_THRESHOLDS
            per_item_thresholds = [th] * len(items)
        elif self.mode == "weighted":
            signal = combined
            th = self.thresholds or (
                quantile_matched_thresholds(fixed[ok], combined[ok]) if ok.any() else FIXED_THRESHOLDS
            )
            per_item_thresholds = [th] * len(items)
        else:
            signal = combined
            self._calibrate(items, ctx, scores, combined, folds, per_item_thresholds)
        preds = []
        for i, it in enumerate(items):
            comp = comps[i]
            acct: dict[str, Any] = {}
            if comp is not None:
                acct = {"usage": comp.usage, "latency_s": comp.latency_s,
                        "cost_usd": comp.cost_usd, "priced": comp.priced, "n_calls": 1}
            if scores[i] is None or per_item_thresholds[i] is None:
                err = comp.error if comp is not None else "no score"
                preds.append(RiskPrediction(
                    it.id, self.name, None, status=_status(comp), raw=(comp.text if comp else ""),
                    detail={"score_source": source, "error": err}, **acct,
                ))
                continue
            th = per_item_thresholds[i]
            level = int(cut([signal[i]], th)[0])
            detail = {"score_source": source, "signal": float(signal[i]), "thresholds": list(th)}
            if folds[i] != -2:
                detail["fold"] = int(folds[i])
            preds.append(RiskPrediction(it.id, self.name, level, raw=json.dumps(scores[i]),
                                    detail=detail, **acct))
        return preds

    def _calibrate(self, items, ctx, scores, combined, folds, per_item_thresholds) -> None:
        train_items, splits = splits_for(items, ctx)
        if ctx.train is not None:
            tr_scores, _, _ = moderation_scores(train_items, ctx, self.name)
            tr_signal = np.array([weighted_signal(s) if s else np.nan for s in tr_scores])
        else:
            tr_signal = combined
        y = np.array([it.level for it in train_items])
        for sp in splits:
            tr = sp.train[~np.isnan(tr_signal[sp.train])]
            if len(tr) == 0:
                continue
            th = self.thresholds or fit_thresholds(tr_signal[tr], y[tr])
            for i in sp.test:
                if scores[i] is not None:
                    per_item_thresholds[i] = th
                    folds[i] = sp.fold


@register("moderation-fixed")
def _fixed(**opts: Any) -> ModerationMethod:
    return ModerationMethod("moderation-fixed", "fixed", **opts)


@register("moderation-weighted")
def _weighted(**opts: Any) -> ModerationMethod:
    return ModerationMethod("moderation-weighted", "weighted", **opts)


@register("moderation-calibrated")
def _calibrated(**opts: Any) -> ModerationMethod:
    return ModerationMethod("moderation-calibrated", "calibrated", **opts)

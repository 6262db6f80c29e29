"""Multi-label metrics on binary indicator matrices (items x labels).

Supported-label macro-F1 (VEILED-SH, §5.2) averages per-label binary F1 over the
labels that occur at least once in the gold labels: a label nobody asked for
cannot be recovered, so it neither helps nor hurts; a label predicted without
gold support still costs precision on no supported label and is ignored, which
is what ``sklearn.metrics.f1_score(average="macro", labels=supported)`` does.
Labels with support but no true positive score 0 (``zero_division=0``).

The bootstrap form takes resampling weights ``w[b, i]`` (how often item i is in
resample b, see :class:`carebench.stats.Resampler`) and computes every
resample's value with three matrix products.
"""

from __future__ import annotations

import numpy as np

from carebench.stats._validation import StatsError


def indicator_pair(y_true: object, y_pred: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate two equally shaped 0/1 indicator matrices (items x labels)."""
    t = np.asarray(y_true)
    p = np.asarray(y_pred)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise StatsError(f"y_true must be a non-empty (n_items, n_labels) matrix, got shape {t.shape}")
    if t.shape != p.shape:
        raise StatsError(f"y_true has shape {t.shape} but y_pred has {p.shape}")
    for name, m in (("y_true", t), ("y_pred", p)):
        if not np.isin(m, (0, 1)).all():
            raise StatsError(f"{name} must hold 0/1 indicators")
    return t.astype(bool), p.astype(bool)


def _f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    den = 2 * tp + fp + fn
    return np.divide(2 * tp, den, out=np.zeros_like(den, dtype=float), where=den > 0)


def per_label_f1(y_true: object, y_pred: object) -> np.ndarray:
    """Binary F1 of each label column (0 where the label has neither gold nor prediction)."""
    t, p = indicator_pair(y_true, y_pred)
    tp = (t & p).sum(axis=0).astype(float)
    fp = (~t & p).sum(axis=0).astype(float)
    fn = (t & ~p).sum(axis=0).astype(float)
    return _f1_from_counts(tp, fp, fn)


def supported_label_macro_f1(y_true: object, y_pred: object) -> float:
    """Mean binary F1 over labels with at least one gold positive; NaN if there are none."""
    t, p = indicator_pair(y_true, y_pred)
    support = t.sum(axis=0) > 0
    if not support.any():
        return float("nan")
    return float(per_label_f1(t, p)[support].mean())


def supported_label_macro_f1_resampled(y_true: object, y_pred: object, weights: np.ndarray) -> np.ndarray:
    """Supported-label macro-F1 of every resample: ``weights`` is ``(B, n_items)``.

    Support is re-evaluated in each resample (a label whose gold cases were all
    left out is not averaged there); a resample with no supported label is NaN.
    """
    t, p = indicator_pair(y_true, y_pred)
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2 or w.shape[1] != t.shape[0]:
        raise StatsError(f"weights must be (B, {t.shape[0]}), got shape {w.shape}")
    tp = w @ (t & p).astype(float)
    fp = w @ (~t & p).astype(float)
    fn = w @ (t & ~p).astype(float)
    support = (tp + fn) > 0
    f1 = _f1_from_counts(tp, fp, fn)
    n_sup = support.sum(axis=1)
    total = np.where(support, f1, 0.0).sum(axis=1)
    return np.divide(total, n_sup, out=np.full(len(w), np.nan), where=n_sup > 0)


def label_prevalence(y: object) -> np.ndarray:
    """Share of items carrying each label (column means of a 0/1 matrix)."""
    m = np.asarray(y)
    if m.ndim != 2 or m.shape[0] == 0:
        raise StatsError(f"y must be a non-empty (n_items, n_labels) matrix, got shape {m.shape}")
    return m.astype(float).mean(axis=0)

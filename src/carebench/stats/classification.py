"""Nominal classification metrics for labels ``0..k-1``.

Every metric is defined on a confusion matrix (rows = truth, columns =
prediction) and the ``*_from_cm`` forms accept any stack ``(..., k, k)``. The
bootstrap builds thousands of resampled confusion matrices at once and calls
these same functions, so point estimates and intervals cannot drift apart.

Degenerate cases follow scikit-learn with ``zero_division=0``: a class never
predicted has precision 0, a class absent from the truth has recall 0, and its
F1 is 0. Macro-F1 averages over the classes *present* (in the truth or the
predictions), as scikit-learn does without ``labels``: a class absent from both
says nothing about the classifier. This matters in bootstrap resamples, where a
rare class is often drawn zero times; counting it as F1 = 0 would give a perfect
classifier an interval well below 1.
"""

from __future__ import annotations

import numpy as np

from carebench.stats._validation import check_k, label_pair


def confusion_matrix(y_true: object, y_pred: object, k: int) -> np.ndarray:
    """Counts ``cm[t, p]`` of items with truth ``t`` predicted as ``p`` (shape ``(k, k)``)."""
    k = check_k(k)
    t, p = label_pair(y_true, y_pred, k)
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k)


def normalize_rows(cm: np.ndarray) -> np.ndarray:
    """Row-normalize a confusion matrix (each truth row sums to 1).

    A class with no true items has an all-zero row rather than NaNs, so the
    matrix can be plotted and serialized as is.
    """
    cm = np.asarray(cm, dtype=float)
    rows = cm.sum(axis=-1, keepdims=True)
    return np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    num, den = np.broadcast_arrays(num, den)
    return np.divide(num, den, out=np.zeros(num.shape), where=den > 0)


def _total(cm: np.ndarray) -> np.ndarray:
    return cm.sum(axis=(-2, -1))


def accuracy_from_cm(cm: np.ndarray) -> np.ndarray:
    cm = np.asarray(cm, dtype=float)
    return np.trace(cm, axis1=-2, axis2=-1) / _total(cm)


def prf_from_cm(cm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-class precision, recall, F1 and support along the last axis."""
    cm = np.asarray(cm, dtype=float)
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    support = cm.sum(axis=-1)
    predicted = cm.sum(axis=-2)
    precision = _safe_div(tp, predicted)
    recall = _safe_div(tp, support)
    # 2PR/(P+R) == 2TP/(2TP+FP+FN) == 2TP/(support+predicted), without 0/0 cases.
    f1 = _safe_div(2.0 * tp, support + predicted)
    return precision, recall, f1, support


def macro_f1_from_cm(cm: np.ndarray) -> np.ndarray:
    """Mean per-class F1 over the classes that occur in the truth or the predictions."""
    cm = np.asarray(cm, dtype=float)
    _, _, f1, support = prf_from_cm(cm)
    present = (support + cm.sum(axis=-2)) > 0
    return _safe_div((f1 * present).sum(axis=-1), present.sum(axis=-1))


def weighted_f1_from_cm(cm: np.ndarray) -> np.ndarray:
    _, _, f1, support = prf_from_cm(cm)
    return (f1 * support).sum(axis=-1) / support.sum(axis=-1)


def high_risk_mask(k: int) -> np.ndarray:
    """Levels counted as high risk: the upper half of the scale (``>= k // 2``).

    For the 4-level risk scale these are Behavior (2) and Attempt (3).
    """
    return np.arange(check_k(k)) >= k // 2


def high_risk_f1_from_cm(cm: np.ndarray) -> np.ndarray:
    """F1 of the high-risk class after collapsing the scale to low vs high."""
    cm = np.asarray(cm, dtype=float)
    pos = high_risk_mask(cm.shape[-1])
    tp = cm[..., pos, :][..., :, pos].sum(axis=(-2, -1))
    actual = cm[..., pos, :].sum(axis=(-2, -1))
    predicted = cm[..., :, pos].sum(axis=(-2, -1))
    return _safe_div(2.0 * tp, actual + predicted)


def accuracy(y_true: object, y_pred: object, k: int) -> float:
    """Share of exact matches."""
    return float(accuracy_from_cm(confusion_matrix(y_true, y_pred, k)))


def per_class_prf(
    y_true: object, y_pred: object, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(precision[k], recall[k], f1[k], support[k])``; support is the true count per class."""
    p, r, f, s = prf_from_cm(confusion_matrix(y_true, y_pred, k))
    return p, r, f, s.astype(np.int64)


def macro_f1(y_true: object, y_pred: object, k: int) -> float:
    """Unweighted mean of the per-class F1 scores over the classes present (each counts equally)."""
    return float(macro_f1_from_cm(confusion_matrix(y_true, y_pred, k)))


def weighted_f1(y_true: object, y_pred: object, k: int) -> float:
    """Per-class F1 averaged with weights proportional to true support."""
    return float(weighted_f1_from_cm(confusion_matrix(y_true, y_pred, k)))


def high_risk_f1(y_true: object, y_pred: object, k: int) -> float:
    """Positive-class F1 on the low (< k//2) vs high (>= k//2) split.

    This is a severity split among already-flagged items, not a detection score.
    """
    return float(high_risk_f1_from_cm(confusion_matrix(y_true, y_pred, k)))

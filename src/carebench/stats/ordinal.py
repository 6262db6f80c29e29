"""Ordinal metrics: weighted kappa, step errors and triage direction.

Labels are ordered levels ``0..k-1`` (for the risk scale Indicator < Ideation <
Behavior < Attempt). As in :mod:`carebench.stats.classification`, each metric
has a ``*_from_cm`` form that works on stacks of confusion matrices.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from carebench.stats._validation import StatsError, label_pair
from carebench.stats.classification import confusion_matrix

KappaWeights = Literal["linear", "quadratic"] | None


def _offsets(k: int) -> np.ndarray:
    """``|i - j|`` for every cell of a k x k matrix."""
    idx = np.arange(k)
    return np.abs(idx[:, None] - idx[None, :]).astype(float)


def kappa_weights(k: int, weights: KappaWeights = None) -> np.ndarray:
    """Disagreement weights: 0/1 (unweighted), ``|i-j|`` (linear) or ``(i-j)^2`` (quadratic)."""
    d = _offsets(k)
    if weights is None:
        return (d > 0).astype(float)
    if weights == "linear":
        return d
    if weights == "quadratic":
        return d**2
    raise StatsError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def kappa_from_cm(cm: np.ndarray, weights: KappaWeights = None) -> np.ndarray:
    """Cohen's kappa ``1 - sum(w*O) / sum(w*E)`` with E from the marginals.

    Undefined (NaN, as scikit-learn's default) when both raters use one and the
    same single category, because then no disagreement is possible by chance.
    """
    cm = np.asarray(cm, dtype=float)
    k = cm.shape[-1]
    w = kappa_weights(k, weights)
    n = cm.sum(axis=(-2, -1))
    expected = cm.sum(axis=-1)[..., :, None] * cm.sum(axis=-2)[..., None, :]
    observed = (w * cm).sum(axis=(-2, -1))
    chance = (w * expected).sum(axis=(-2, -1)) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1.0 - observed / chance
    return np.where(chance > 0, out, np.nan)


def mae_from_cm(cm: np.ndarray) -> np.ndarray:
    cm = np.asarray(cm, dtype=float)
    return (cm * _offsets(cm.shape[-1])).sum(axis=(-2, -1)) / cm.sum(axis=(-2, -1))


def adjacent_accuracy_from_cm(cm: np.ndarray) -> np.ndarray:
    cm = np.asarray(cm, dtype=float)
    near = _offsets(cm.shape[-1]) <= 1
    return (cm * near).sum(axis=(-2, -1)) / cm.sum(axis=(-2, -1))


def under_triage_from_cm(cm: np.ndarray) -> np.ndarray:
    """Share of items predicted below their true level (strict lower triangle)."""
    cm = np.asarray(cm, dtype=float)
    return np.tril(cm, -1).sum(axis=(-2, -1)) / cm.sum(axis=(-2, -1))


def over_triage_from_cm(cm: np.ndarray) -> np.ndarray:
    """Share of items predicted above their true level (strict upper triangle)."""
    cm = np.asarray(cm, dtype=float)
    return np.triu(cm, 1).sum(axis=(-2, -1)) / cm.sum(axis=(-2, -1))


def cohen_kappa(y_true: object, y_pred: object, k: int, weights: KappaWeights = None) -> float:
    """Cohen's kappa between two label vectors (truth vs prediction, or rater vs rater)."""
    return float(kappa_from_cm(confusion_matrix(y_true, y_pred, k), weights))


def qwk(y_true: object, y_pred: object, k: int) -> float:
    """Quadratic-weighted kappa: disagreement cost grows with the square of the step gap."""
    return cohen_kappa(y_true, y_pred, k, "quadratic")


def _steps(y_true: object, y_pred: object) -> np.ndarray:
    t, p = label_pair(y_true, y_pred)
    return p - t


def mae(y_true: object, y_pred: object, k: int | None = None) -> float:
    """Mean absolute error in ordinal steps. ``k`` only validates the label range."""
    if k is not None:
        label_pair(y_true, y_pred, k)
    return float(np.abs(_steps(y_true, y_pred)).mean())


def adjacent_accuracy(y_true: object, y_pred: object, k: int | None = None) -> float:
    """Share of predictions within one level of the truth (``|pred - true| <= 1``)."""
    if k is not None:
        label_pair(y_true, y_pred, k)
    return float((np.abs(_steps(y_true, y_pred)) <= 1).mean())


def under_triage(y_true: object, y_pred: object, k: int | None = None) -> float:
    """Share of items whose predicted level is below the true level (missed severity)."""
    if k is not None:
        label_pair(y_true, y_pred, k)
    return float((_steps(y_true, y_pred) < 0).mean())


def over_triage(y_true: object, y_pred: object, k: int | None = None) -> float:
    """Share of items whose predicted level is above the true level (false escalation)."""
    if k is not None:
        label_pair(y_true, y_pred, k)
    return float((_steps(y_true, y_pred) > 0).mean())

"""Input checks shared by the statistics modules.

``carebench.stats`` depends on nothing else of ours, so it defines its own error
type; it subclasses ``ValueError`` so callers can catch it without importing it.
"""

from __future__ import annotations

import numpy as np


class StatsError(ValueError):
    """Invalid input to a statistic (empty, mismatched lengths, labels out of range)."""


def as_labels(y: object, k: int | None = None, name: str = "labels") -> np.ndarray:
    """Return ``y`` as a 1-D int64 array of labels in ``0..k-1``.

    Integral floats are accepted (labels often travel through pandas as floats);
    anything else raises :class:`StatsError` naming the argument.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise StatsError(f"{name} is empty: a statistic needs at least one item")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise StatsError(f"{name} must hold integer labels, got non-integer values")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind in "iu":
        arr = arr.astype(np.int64, copy=False)
    else:
        raise StatsError(f"{name} must hold integer labels, got dtype {arr.dtype}")
    if k is not None:
        check_k(k)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= k:
            raise StatsError(f"{name} must lie in 0..{k - 1}, found values in {lo}..{hi}")
    return arr


def check_k(k: int) -> int:
    """Number of classes must be an int >= 2 (a 1-class scale has no errors to score)."""
    if isinstance(k, bool) or int(k) != k or k < 2:
        raise StatsError(f"k (number of classes) must be an integer >= 2, got {k!r}")
    return int(k)


def label_pair(
    y_true: object, y_pred: object, k: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (truth, prediction) pair of equal-length label vectors."""
    t = as_labels(y_true, k, "y_true")
    p = as_labels(y_pred, k, "y_pred")
    if t.shape != p.shape:
        raise StatsError(f"y_true has {t.size} items but y_pred has {p.size}")
    return t, p


def check_alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise StatsError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def check_B(B: int) -> int:
    if isinstance(B, bool) or int(B) != B or B < 1:
        raise StatsError(f"B (number of resamples) must be a positive integer, got {B!r}")
    return int(B)

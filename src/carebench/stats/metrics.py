"""Named metric registries used by suites, the chance baseline and the bootstrap.

``CM_METRICS`` maps a name to a vectorized function of a confusion-matrix stack
``(..., k, k) -> (...)``; ``RISK_METRICS`` wraps the headline ones as
``fn(y_true, y_pred, k) -> float``. Both are computed from the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import numpy as np

from carebench.stats._validation import StatsError
from carebench.stats.classification import (
    accuracy_from_cm,
    confusion_matrix,
    high_risk_f1_from_cm,
    macro_f1_from_cm,
    weighted_f1_from_cm,
)
from carebench.stats.ordinal import (
    adjacent_accuracy_from_cm,
    kappa_from_cm,
    mae_from_cm,
    over_triage_from_cm,
    under_triage_from_cm,
)

CmMetric = Callable[[np.ndarray], np.ndarray]

#: Headline metrics of the risk suite (Beyond the Flag, Table 2, plus triage direction).
RISK_METRIC_NAMES: tuple[str, ...] = (
    "accuracy",
    "macro_f1",
    "weighted_f1",
    "qwk",
    "mae",
    "adjacent_accuracy",
    "high_risk_f1",
    "under_triage",
    "over_triage",
)

CM_METRICS: dict[str, CmMetric] = {
    "accuracy": accuracy_from_cm,
    "macro_f1": macro_f1_from_cm,
    "weighted_f1": weighted_f1_from_cm,
    "qwk": partial(kappa_from_cm, weights="quadratic"),
    "mae": mae_from_cm,
    "adjacent_accuracy": adjacent_accuracy_from_cm,
    "high_risk_f1": high_risk_f1_from_cm,
    "under_triage": under_triage_from_cm,
    "over_triage": over_triage_from_cm,
    # Extra agreement-style scores available to the bootstrap by name.
    "kappa": partial(kappa_from_cm, weights=None),
    "linear_kappa": partial(kappa_from_cm, weights="linear"),
}

#: Metrics where a smaller value is better (used to orient "probability of improvement").
LOWER_IS_BETTER: frozenset[str] = frozenset({"mae", "under_triage", "over_triage"})


def _from_labels(cm_fn: CmMetric, y_true: object, y_pred: object, k: int) -> float:
    return float(cm_fn(confusion_matrix(y_true, y_pred, k)))


RISK_METRICS: dict[str, Callable[[object, object, int], float]] = {
    name: partial(_from_labels, CM_METRICS[name]) for name in RISK_METRIC_NAMES
}


def resolve_names(names: Iterable[str] | str | None) -> list[str]:
    """Default to the risk metrics; reject unknown names with the list of known ones."""
    if names is None:
        return list(RISK_METRIC_NAMES)
    if isinstance(names, str):
        names = [names]
    out = list(names)
    unknown = [n for n in out if n not in CM_METRICS]
    if unknown:
        raise StatsError(f"unknown metric(s) {unknown}; known: {sorted(CM_METRICS)}")
    if not out:
        raise StatsError("names is empty: ask for at least one metric")
    return out


def metrics_from_cm(
    cm: np.ndarray, names: Iterable[str] | str | None = None
) -> dict[str, np.ndarray]:
    """Evaluate several metrics on one confusion matrix or a stack of them."""
    return {n: CM_METRICS[n](cm) for n in resolve_names(names)}


def compute_metrics(
    y_true: object, y_pred: object, k: int, names: Iterable[str] | str | None = None
) -> dict[str, float]:
    """All requested metrics (default: ``RISK_METRICS``) for one prediction vector."""
    cm = confusion_matrix(y_true, y_pred, k)
    return {n: float(v) for n, v in metrics_from_cm(cm, names).items()}

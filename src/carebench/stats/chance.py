"""Analytic chance baseline: what a uniform random guesser scores on a label distribution.

Two definitions, both computed exactly (no simulation):

``"expected_confusion"`` (default, the definition behind the chance row of
Beyond the Flag, Table 2): evaluate every metric on the *expected* confusion matrix
of a uniform guesser, ``E[cm[t, p]] = n_t / k``. For the paper's counts
(127, 54, 123, 212) this gives macro-F1 0.23762 -> "0.238", which is what the
table prints.

``"expectation"``: the true expected value ``E[metric]`` over the random
predictions. For metrics linear in the confusion matrix (accuracy, MAE,
adjacent accuracy, triage rates) it equals the first definition. F1 scores
are ratios, and the expectation of a ratio is not the ratio of expectations:
for the paper's counts ``E[macro-F1] = 0.23729``, which would print as
"0.237", so the table did not use this definition (the two differ by < 0.001).
Any Cohen kappa has expectation exactly 0: given the predicted class totals
``m``, the predicted labels are a uniformly random arrangement, so
``E[cm[t, p] | m] = n_t m_p / N``, which is precisely the chance term of kappa;
hence ``E[kappa | m] = 0`` for every ``m`` where kappa is defined.

For F1 of class c, with ``M ~ Binomial(N, q)`` predicted as c (q = 1/k, or h/k
for the high-risk side spanning h levels) and ``E[TP | M] = M n_c / N``::

    E[F1_c] = sum_M P(M) * 2 (M n_c / N) / (n_c + M)

one O(N) sum per class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from carebench.stats._validation import StatsError
from carebench.stats.classification import high_risk_mask
from carebench.stats.metrics import RISK_METRIC_NAMES, metrics_from_cm

ChanceMethod = Literal["expected_confusion", "expectation"]


def _counts(label_counts: Sequence[int]) -> np.ndarray:
    n = np.asarray(label_counts)
    if n.ndim != 1 or n.size < 2:
        raise StatsError(
            f"label_counts must list one count per class (k >= 2), got {label_counts!r}"
        )
    if np.any(n < 0) or np.any(n != np.round(n)):
        raise StatsError(f"label_counts must be non-negative integers, got {label_counts!r}")
    if n.sum() == 0:
        raise StatsError("label_counts sum to 0: the chance baseline needs at least one item")
    return n.astype(np.int64)


def expected_confusion(label_counts: Sequence[int]) -> np.ndarray:
    """Expected confusion matrix of a uniform guesser: each truth row spread evenly."""
    n = _counts(label_counts).astype(float)
    k = n.size
    return np.repeat(n[:, None] / k, k, axis=1)


def expected_f1(n_pos: int, n_total: int, q: float) -> float:
    """Exact ``E[F1]`` of one class with ``n_pos`` true members when each of ``n_total``
    items is predicted as that class independently with probability ``q``.

    Zero-division convention: F1 = 0 when the class has neither true nor predicted items.
    """
    if n_pos == 0:
        return 0.0
    from scipy.stats import binom  # here, not at import: scipy.stats takes most of a second to load

    m = np.arange(n_total + 1)
    pmf = binom.pmf(m, n_total, q)
    return float(np.sum(pmf * 2.0 * (m * n_pos / n_total) / (n_pos + m)))


def chance_baseline(
    label_counts: Sequence[int], method: ChanceMethod = "expected_confusion"
) -> dict[str, float]:
    """Chance-level value of every ``RISK_METRICS`` metric under uniform random prediction.

    ``label_counts[c]`` is the number of items whose true level is ``c``. See the
    module docstring for the two definitions; the default reproduces Beyond the Flag,
    Table 2.
    """
    n = _counts(label_counts)
    base = {
        name: float(v)
        for name, v in metrics_from_cm(expected_confusion(n), RISK_METRIC_NAMES).items()
    }
    if method == "expected_confusion":
        return base
    if method != "expectation":
        raise StatsError(f"method must be 'expected_confusion' or 'expectation', got {method!r}")
    k, total = n.size, int(n.sum())
    f1 = np.array([expected_f1(int(c), total, 1.0 / k) for c in n])
    pos = high_risk_mask(k)
    out = dict(base)
    out["macro_f1"] = float(f1.mean())
    out["weighted_f1"] = float((f1 * n).sum() / total)
    out["high_risk_f1"] = expected_f1(int(n[pos].sum()), total, pos.sum() / k)
    out["qwk"] = 0.0
    return out

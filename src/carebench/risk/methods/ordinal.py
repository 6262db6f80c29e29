"""An ordinal-aware supervised baseline: ``tfidf-ordinal`` (Frank & Hall, 2001).

The seed's supervised baselines treat the four levels as unordered classes (§4.4). Here
the ordering is used: three binary logistic regressions estimate P(level >= j) for
j = 1, 2, 3 on the same TF-IDF features (each class-balanced for its own split), and
the level probabilities follow as differences of adjacent cumulative probabilities
(clipped at 0 and renormalised where the independent fits cross). The predicted level
is, by default, the median of that distribution (the smallest level whose cumulative
probability reaches 1/2), which minimises expected absolute error, i.e. it targets MAE
and QWK; ``decision="argmax"`` gives Frank & Hall's original rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carebench.risk.methods.base import MethodContext, RiskItem, RiskPrediction, register
from carebench.risk.methods.supervised import FittedMethod, K, tfidf_vectorizer
from carebench.types import CarebenchError


def cumulative_to_levels(p_ge: np.ndarray) -> np.ndarray:
    """(n, K-1) estimates of P(y >= j), j=1..K-1 -> (n, K) level probabilities."""
    n = p_ge.shape[0]
    cum = np.hstack([np.ones((n, 1)), p_ge, np.zeros((n, 1))])
    probs = np.clip(cum[:, :-1] - cum[:, 1:], 0.0, None)
    total = probs.sum(1, keepdims=True)
    return np.where(total > 0, probs / np.where(total > 0, total, 1), 1.0 / K)


def median_level(probs: np.ndarray) -> np.ndarray:
    """Smallest level whose cumulative probability reaches 1/2."""
    return np.argmax(np.cumsum(probs, axis=1) >= 0.5 - 1e-12, axis=1)


class TfidfOrdinal(FittedMethod):
    name = "tfidf-ordinal"

    def __init__(self, seed: int | None = None, decision: str = "median", **options: Any):
        if decision not in ("median", "argmax"):
            raise CarebenchError("tfidf-ordinal: decision must be 'median' or 'argmax'")
        super().__init__(seed, **options)
        self.decision = decision

    def fit_predict(self, train, test, seed):
        from sklearn.linear_model import LogisticRegression

        vec = tfidf_vectorizer(len(train))
        x = vec.fit_transform([it.text for it in train])
        xt = vec.transform([it.text for it in test])
        y = np.array([it.level for it in train])
        p_ge = np.zeros((len(test), K - 1))
        for j in range(1, K):
            target = (y >= j).astype(int)
            if target.min() == target.max():  # every training item on one side
                p_ge[:, j - 1] = float(target[0])
                continue
            clf = LogisticRegression(C=float(self.options.get("C", 1.0)), class_weight="balanced",
                                     max_iter=2000, random_state=seed)
            clf.fit(x, target)
            p_ge[:, j - 1] = clf.predict_proba(xt)[:, 1]
        return cumulative_to_levels(p_ge)

    def predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        preds = super().predict(items, ctx)
        if self.decision == "median":
            for p in preds:
                p.level = int(median_level(np.asarray([p.probs]))[0])
                p.detail["decision"] = "median"
        return preds


@register("tfidf-ordinal")
def _tfidf_ordinal(**opts: Any) -> TfidfOrdinal:
    return TfidfOrdinal(**opts)

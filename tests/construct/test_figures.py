"""Topic table (k-means over embeddings, TF-IDF names) on a hand-made two-topic set."""

from __future__ import annotations

import numpy as np

from carebench.construct.figures import age_band, topics


def test_topics_two_clear_clusters():
    texts = ["exam stress exam", "exam results stress", "exam panic", "lonely night alone", "alone lonely"]
    emb = np.array([[1, 0], [1, 0.1], [0.9, 0], [0, 1], [0.1, 1]], dtype=float)
    table = topics(texts, emb, k=2, terms=2)
    assert [r[:2] for r in table.rows] == [[1, 3], [2, 2]]  # numbered by size
    assert table.rows[0][2].split(", ")[0] == "exam"  # 4 of the cluster's 8 words
    assert set(table.rows[1][2].split(", ")) <= {"lonely", "alone", "night"}


def test_age_band_edges():
    assert [age_band(a) for a in (17, 18, 24, 25, 64, 65, None, "x")] == \
        ["<18", "18-24", "18-24", "25-34", "50-64", "65+", "unknown", "unknown"]

"""Topic table (k-means over embeddings, TF-IDF names) on a hand-made two-topic set."""

from __future__ import annotations

import numpy as np

from carebench.construct.figures import age_band, topic_clusters, topic_terms


def test_topics_two_clear_clusters():
    texts = ["exam stress exam", "exam results stress", "exam panic", "lonely night alone", "alone lonely"]
    emb = np.array([[1, 0], [1, 0.1], [0.9, 0], [0, 1], [0.1, 1]], dtype=float)
    clusters = topic_clusters(emb, k=2)
    assert clusters[:3] == [clusters[0]] * 3 and clusters[3:] == [clusters[3]] * 2 != clusters[:2]
    table = topic_terms(texts, clusters, terms=2)
    assert [(t["topic"], t["prompts"]) for t in table] == [(1, 3), (2, 2)]  # numbered by size
    assert table[0]["terms"][0] == "exam"  # 4 of the cluster's 8 words
    assert set(table[1]["terms"]) <= {"lonely", "alone", "night"}


def test_age_band_edges():
    assert [age_band(a) for a in (17, 18, 24, 25, 64, 65, None, "x")] == \
        ["<18", "18-24", "18-24", "25-34", "50-64", "65+", "unknown", "unknown"]

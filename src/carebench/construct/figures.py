"""Exploratory figures of a constructed set (VEILED-SH, Appendix A.3).

Prompt length by context (Fig. 6), assigned persona demographics (Fig. 5),
source year (Fig. 7) and topics (Fig. 4). Topics are k-means clusters of the
prompts' sentence embeddings, each named by its top TF-IDF terms: nothing here
needs a topic model or a download. All are descriptive proxies.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from carebench.report import Block, Table, bar_chart, box_chart, figure_or_sentence

AGE_BANDS = ((0, 17, "<18"), (18, 24, "18-24"), (25, 34, "25-34"), (35, 49, "35-49"), (50, 64, "50-64"),
             (65, 200, "65+"))


def age_band(age: Any) -> str:
    if isinstance(age, int | float) and not isinstance(age, bool):
        for lo, hi, name in AGE_BANDS:
            if lo <= age <= hi:
                return name
    return "unknown"


def length_by_context(prompts: list[dict[str, Any]]) -> Block:
    groups: dict[str, list[float]] = {}
    for p in prompts:
        groups.setdefault(p["context"], []).append(float(len(p["text"].split())))
    return figure_or_sentence("construct-length-by-context", "Prompt length in words by application context.",
                              lambda: box_chart(dict(sorted(groups.items())), "Prompt length by context", "words"))


def demographics(prompts: list[dict[str, Any]], top: int = 8) -> list[Block]:
    figs = []
    attrs = [p["persona"].get("attributes", {}) for p in prompts]
    fields = {"age band": [age_band(a.get("age")) for a in attrs]}
    for key in ("sex", "education", "marital_status", "occupation"):
        fields[key.replace("_", " ")] = [str(a.get(key, "unknown")) for a in attrs]
    for name, values in fields.items():
        counts = Counter(values).most_common(top)
        cats = [c for c, _ in counts]
        if name == "age band":
            order = [b for *_, b in AGE_BANDS] + ["unknown"]
            cats = [b for b in order if b in dict(counts)]
        figs.append(figure_or_sentence(
            f"construct-persona-{name.replace(' ', '-')}", f"Assigned persona {name} (top {top}).",
            lambda cats=cats, counts=counts, name=name: bar_chart(
                cats, {"prompts": [dict(counts)[c] for c in cats]}, f"Assigned personas: {name}", "prompts")))
    return figs


def source_years(rows: list[dict[str, Any]]) -> Block | None:
    years = Counter(r["year"] for r in rows if r.get("year") is not None)
    if not years:
        return None
    cats = [str(y) for y in sorted(years)]
    total = sum(years.values())
    return figure_or_sentence("construct-source-year", "Share (%) of retained source rows by year.",
                              lambda: bar_chart(cats, {"% of rows": [100.0 * years[int(c)] / total for c in cats]},
                                                "Source year", "% of retained rows"))


def topic_clusters(embeddings: np.ndarray, k: int = 6, seed: int = 42) -> list[int]:
    """k-means cluster of each prompt (computed once, inside the build, where the
    embeddings exist; the run records the labels so the topic table re-renders
    without an embedder)."""
    from sklearn.cluster import KMeans

    k = max(1, min(k, len(embeddings)))
    return [int(c) for c in KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(embeddings)]


def topic_terms(texts: list[str], clusters: list[int], terms: int = 6) -> list[dict[str, Any]]:
    """Each cluster's size and highest mean TF-IDF terms, largest cluster first (numbered
    in that order; ties keep cluster order)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(stop_words="english", min_df=1)
    m = tfidf.fit_transform(texts)
    vocab = np.array(tfidf.get_feature_names_out())
    labels = np.asarray(clusters)
    rows = []
    for c in sorted(set(clusters)):
        members = np.flatnonzero(labels == c)
        mean = np.asarray(m[members].mean(axis=0)).ravel()
        rows.append({"prompts": int(members.size),
                     "terms": [str(t) for t in vocab[np.argsort(-mean, kind="stable")[:terms]]]})
    rows.sort(key=lambda r: -r["prompts"])
    return [{"topic": i + 1, **r} for i, r in enumerate(rows)]


def topics_table(topics: list[dict[str, Any]]) -> Table:
    return Table(["topic", "prompts", "top TF-IDF terms"],
                 [[t["topic"], t["prompts"], ", ".join(t["terms"])] for t in topics],
                 caption=f"Topics: k-means ({len(topics)} clusters) over prompt embeddings, named by TF-IDF terms.")

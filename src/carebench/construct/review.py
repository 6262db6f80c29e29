"""Human review of rewrites (VEILED-SH, Appendix A.5): the sample and its statistics.

Sampling: equal numbers per context x rewriter cell (270 by default: 30 in each
of 3 x 3 cells), within a cell allocated to (source, risk) strata in proportion
to their size, seeded. Two reviewers get 180 items each, 90 of them shared
(shared items spread over the cells); the rewriter is kept out of the sheets and
recorded only in a private key file beside them, with each item's cell and
inverse-probability weight ``N_cell / n_cell``.

Statistics: a shared item counts once (its ratings averaged, a gate failed if
either reviewer said No); failure rates and mean ratings are IPW-weighted, with
2,000 within-cell bootstrap resamples; agreement on the shared items is Cohen's
kappa for gates and quadratic-weighted kappa for ratings (Table 9).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from carebench.construct.quality import GATE_NAMES, GATES, SCORES
from carebench.construct.sources import WorkRow
from carebench.stats import cohen_kappa, qwk, weighted_cell_bootstrap
from carebench.types import CarebenchError


@dataclass
class ReviewSampleConfig:
    total: int = 270
    per_reviewer: int = 180
    shared: int = 90
    reviewers: tuple[str, str] = ("reviewer_1", "reviewer_2")
    seed: int = 42

    def validate(self) -> None:
        if self.total != 2 * self.per_reviewer - self.shared:
            raise CarebenchError(
                f"review design does not add up: total {self.total} must equal 2 x per-reviewer "
                f"{self.per_reviewer} - shared {self.shared}"
            )
        if not 0 <= self.shared <= self.per_reviewer:
            raise CarebenchError("shared items must be between 0 and the per-reviewer count")
        if len(set(self.reviewers)) != 2:
            raise CarebenchError("give two distinct reviewer names")


def largest_remainder(sizes: dict[Any, int], n: int) -> dict[Any, int]:
    """Split ``n`` over strata in proportion to ``sizes``, never above a stratum's size."""
    total = sum(sizes.values())
    n = min(n, total)
    if total == 0:
        return dict.fromkeys(sizes, 0)
    raw = {k: n * v / total for k, v in sizes.items()}
    alloc = {k: min(int(np.floor(x)), sizes[k]) for k, x in raw.items()}
    order = sorted(sizes, key=lambda k: (-(raw[k] - np.floor(raw[k])), str(k)))
    while sum(alloc.values()) < n:
        for k in order:
            if sum(alloc.values()) >= n:
                break
            if alloc[k] < sizes[k]:
                alloc[k] += 1
    return alloc


def draw_sample(rows: list[WorkRow], cfg: ReviewSampleConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Key rows (one per sampled item, private) and a summary of the design."""
    cfg.validate()
    rows = [r for r in rows if r.context and r.rewriter and r.output]
    if not rows:
        raise CarebenchError("no rewritten rows to sample (need rows with context, rewriter and output)")
    rng = np.random.default_rng(cfg.seed)
    cells: dict[tuple[str, str], list[WorkRow]] = defaultdict(list)
    for r in rows:
        cells[(r.context, r.rewriter)].append(r)  # type: ignore[index]
    keys = sorted(cells)
    base, extra = divmod(cfg.total, len(keys))
    want = {k: base + (1 if i < extra else 0) for i, k in enumerate(keys)}
    picked: dict[tuple[str, str], list[WorkRow]] = {}
    for k in keys:
        strata: dict[tuple[str, str], list[WorkRow]] = defaultdict(list)
        for r in cells[k]:
            strata[(r.source, r.risk)].append(r)
        alloc = largest_remainder({s: len(v) for s, v in strata.items()}, want[k])
        chosen: list[WorkRow] = []
        for s in sorted(strata):
            members = strata[s]
            idx = rng.permutation(len(members))[: alloc[s]]
            chosen += [members[int(i)] for i in sorted(idx)]
        picked[k] = chosen
    n = sum(len(v) for v in picked.values())
    # interleave cells so the shared block and each reviewer's block span all cells
    queues = {k: list(rng.permutation(len(picked[k]))) for k in keys}
    order: list[tuple[tuple[str, str], WorkRow]] = []
    while any(queues.values()):
        for k in keys:
            if queues[k]:
                order.append((k, picked[k][int(queues[k].pop(0))]))
    shared = min(cfg.shared, n)
    per = min(cfg.per_reviewer, n)
    a, b = cfg.reviewers
    item_ids = [f"R{i + 1:04d}" for i in rng.permutation(n)]
    key_rows = []
    for pos, ((ctx, rw), r) in enumerate(order):
        if pos < shared:
            who = [a, b]
        elif pos < per:
            who = [a]
        else:
            who = [b]
        key_rows.append({
            "item_id": item_ids[pos], "row_id": r.id, "source_id": r.post_id, "source": r.source,
            "risk": r.risk, "context": ctx, "rewriter": rw, "cell": f"{ctx}|{rw}",
            "cell_population": len(cells[(ctx, rw)]), "cell_sample": len(picked[(ctx, rw)]),
            "weight": len(cells[(ctx, rw)]) / len(picked[(ctx, rw)]), "reviewers": who,
            "shared": len(who) == 2,
        })
    key_rows.sort(key=lambda k: k["item_id"])
    design = {
        "items": n, "requested": cfg.total, "cells": {f"{c}|{w}": len(picked[(c, w)]) for c, w in keys},
        "cell_population": {f"{c}|{w}": len(cells[(c, w)]) for c, w in keys},
        "shared": shared, "per_reviewer": {a: sum(a in k["reviewers"] for k in key_rows),
                                           b: sum(b in k["reviewers"] for k in key_rows)},
        "seed": cfg.seed,
    }
    if n < cfg.total:
        design["note"] = f"only {n} rewritten rows could be sampled (fewer than {cfg.total} requested)"
    return key_rows, design


def sheet_rows(key_rows: list[dict[str, Any]], rows_by_id: dict[str, WorkRow], reviewer: str) -> list[dict[str, Any]]:
    """The blind sheet for one reviewer: source, persona, context and rewrite; no rewriter."""
    out = []
    for k in key_rows:
        if reviewer not in k["reviewers"]:
            continue
        r = rows_by_id[k["row_id"]]
        persona = r.persona
        out.append({
            "item_id": k["item_id"], "reviewer": reviewer, "source_text": r.text,
            "persona": {"text": persona.text if persona else "", "attributes": dict(persona.attributes) if persona else {}},
            "context": k["context"], "text": r.output,
        })
    return out


# -- statistics ---------------------------------------------------------------------------


def combine(reviews: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per item: gates fail if any reviewer said No, ratings averaged."""
    by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in reviews:
        by_item[r["item_id"]].append(r)
    out = {}
    for item, rs in by_item.items():
        rec: dict[str, Any] = {"reviewers": sorted(r["reviewer"] for r in rs)}
        for g in GATES:
            rec[g] = all(bool(r[g]) for r in rs)
        for s in SCORES:
            rec[s] = float(np.mean([r[s] for r in rs]))
        out[item] = rec
    return out


def review_stats(
    key_rows: list[dict[str, Any]], reviews: list[dict[str, Any]], B: int = 2000, seed: int = 12345
) -> dict[str, Any]:
    """Weighted failure rates and mean ratings with intervals, plus shared-item agreement."""
    key = {k["item_id"]: k for k in key_rows}
    unknown = sorted({r["item_id"] for r in reviews} - set(key))
    if unknown:
        raise CarebenchError(f"reviews name items not in the key: {', '.join(unknown[:5])}")
    for r in reviews:
        if r["reviewer"] not in key[r["item_id"]]["reviewers"]:
            raise CarebenchError(f"item {r['item_id']} was not assigned to reviewer {r['reviewer']!r}")
    seen: set[tuple[str, str]] = set()
    for r in reviews:
        pair = (r["item_id"], r["reviewer"])
        if pair in seen:
            raise CarebenchError(f"item {pair[0]} reviewed twice by {pair[1]!r}")
        seen.add(pair)
    items = combine(reviews)
    ids = sorted(items)
    if not ids:
        raise CarebenchError("no reviews to summarise")
    cols = [f"fail_{GATE_NAMES[g]}" for g in GATES] + list(SCORES)
    x = np.array([[0.0 if items[i][g] else 1.0 for g in GATES] + [items[i][s] for s in SCORES] for i in ids])
    w = np.array([key[i]["weight"] for i in ids])
    cells = [key[i]["cell"] for i in ids]
    est = weighted_cell_bootstrap(x, w, cells, B=B, seed=seed)
    estimates = {c: {"estimate": float(est.estimate[j]), "lo": float(est.lo[j]), "hi": float(est.hi[j])}
                 for j, c in enumerate(cols)}
    return {
        "items_reviewed": len(ids),
        "items_in_key": len(key_rows),
        "missing_reviews": _missing(key_rows, reviews),
        "estimates": estimates,
        "bootstrap": {"B": B, "seed": seed, "cells": sorted(set(cells))},
        "agreement": agreement(reviews),
    }


def _missing(key_rows: list[dict[str, Any]], reviews: list[dict[str, Any]]) -> int:
    done = {(r["item_id"], r["reviewer"]) for r in reviews}
    return sum((k["item_id"], who) not in done for k in key_rows for who in k["reviewers"])


def agreement(reviews: list[dict[str, Any]]) -> dict[str, Any]:
    """Cohen's kappa per gate and quadratic-weighted kappa per rating on items both reviewed."""
    by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in reviews:
        by_item[r["item_id"]].append(r)
    pairs = [sorted(rs, key=lambda r: r["reviewer"]) for rs in by_item.values() if len(rs) == 2]
    out: dict[str, Any] = {"shared_items": len(pairs)}
    if len(pairs) < 2:
        return out
    for g in GATES:
        a = [int(bool(p[0][g])) for p in pairs]
        b = [int(bool(p[1][g])) for p in pairs]
        out[f"kappa_{GATE_NAMES[g]}"] = _finite(cohen_kappa(a, b, 2))
    for s in SCORES:
        a = [int(p[0][s]) - 1 for p in pairs]
        b = [int(p[1][s]) - 1 for p in pairs]
        out[f"qwk_{s}"] = _finite(qwk(a, b, 5))
    return out


def _finite(v: float) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)

"""Inter-rater agreement on the 4-level scale ("Beyond the Flag", §3.4).

The paper checks its reference labels by having three psychiatrists relabel a sample
and reports pairwise quadratic-weighted kappa per rater pair, with how many items
each pair disagreed on and whether any disagreement spanned more than one level.
``carebench risk agreement`` computes those, plus Krippendorff's alpha (ordinal) and
Fleiss' kappa across all raters, each with a percentile bootstrap interval over items.

Input: a ratings table, one row per item and one column per rater (levels as 0-3,
a-d or level names; a blank cell is a missing rating), or a risk run directory, whose
methods' predictions (and the gold labels) become the raters, to compare models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from carebench.datasets.files import format_from_suffix, read_rows
from carebench.risk.scale import K, to_level
from carebench.stats import bootstrap_ci, fleiss_kappa, krippendorff_alpha, qwk
from carebench.types import CarebenchError


@dataclass
class Ratings:
    raters: list[str]
    items: list[str]
    values: np.ndarray  # (n_items, n_raters), NaN = missing
    source: str


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def load_ratings(path: str | Path, raters: list[str] | None = None, id_column: str = "id") -> Ratings:
    """A ratings table (one column per rater) or a risk run directory / records.jsonl."""
    p = Path(path)
    if p.is_dir() or p.name == "records.jsonl":
        return _from_records(p / "records.jsonl" if p.is_dir() else p, raters)
    if not p.is_file():
        raise CarebenchError(f"ratings file not found: {p}")
    fmt = format_from_suffix(p)
    if fmt is None:
        raise CarebenchError(f"{p}: unsupported file type (use .csv, .jsonl or .parquet)")
    rows = list(read_rows(p, fmt))
    if not rows:
        raise CarebenchError(f"{p}: no rows")
    columns = list(rows[0][1])
    cols = raters or [c for c in columns if c != id_column]
    missing = [c for c in cols if c not in columns]
    if missing:
        raise CarebenchError(f"{p}: no rater column(s) {', '.join(missing)}; columns: {', '.join(columns)}")
    values = np.full((len(rows), len(cols)), np.nan)
    items = []
    for i, (loc, row) in enumerate(rows):
        items.append(str(row.get(id_column, i + 1)))
        for j, c in enumerate(cols):
            v = row.get(c)
            if _blank(v):
                continue
            try:
                values[i, j] = to_level(v)
            except CarebenchError as e:
                raise CarebenchError(f"{p}: {loc}: column {c!r}: {e}") from None
    return _checked(Ratings(cols, items, values, str(p)))


def _from_records(path: Path, raters: list[str] | None) -> Ratings:
    from carebench.engine.rundir import read_jsonl

    if not path.is_file():
        raise CarebenchError(f"no records.jsonl at {path}")
    recs = read_jsonl(path)
    gold: dict[str, int] = {}
    preds: dict[str, dict[str, int]] = {}
    for r in recs:
        if r.get("gold") is None:  # a negative item: no level on the scale to agree on
            continue
        gold.setdefault(str(r["item_id"]), int(r["gold"]))
        if r.get("status") == "ok" and r.get("pred") is not None:
            preds.setdefault(r["method"], {})[str(r["item_id"])] = int(r["pred"])
    names = raters or ["gold", *preds]
    unknown = [n for n in names if n != "gold" and n not in preds]
    if unknown:
        raise CarebenchError(f"{path}: no predictions from {', '.join(unknown)}; methods: "
                             f"{', '.join(preds)}")
    items = list(gold)
    values = np.full((len(items), len(names)), np.nan)
    for j, n in enumerate(names):
        source = gold if n == "gold" else preds[n]
        for i, it in enumerate(items):
            if it in source:
                values[i, j] = source[it]
    return _checked(Ratings(names, items, values, str(path)))


def _checked(r: Ratings) -> Ratings:
    if len(r.raters) < 2:
        raise CarebenchError("agreement needs at least two raters (columns)")
    return r


def _interval(fn, values: np.ndarray, B: int, seed: int) -> dict[str, Any]:
    """Point value and 95% percentile interval over items resampled with replacement."""
    with np.errstate(all="ignore"):
        value, lo, hi = bootstrap_ci(_safe(fn), values, B=B, seed=seed)
    clean = [None if not np.isfinite(x) else float(x) for x in (value, lo, hi)]
    return {"value": clean[0], "ci": clean[1:]}


def _safe(fn):
    def wrapped(v: np.ndarray) -> float:
        try:
            return float(fn(v))
        except ValueError:  # e.g. a resample with no item rated twice
            return float("nan")
    return wrapped


def agreement(r: Ratings, B: int = 2000, seed: int = 42) -> dict[str, Any]:
    """Every number the command prints, JSON-ready."""
    pairs = []
    for a, b in combinations(range(len(r.raters)), 2):
        both = ~np.isnan(r.values[:, a]) & ~np.isnan(r.values[:, b])
        va, vb = r.values[both, a].astype(int), r.values[both, b].astype(int)
        gap = np.abs(va - vb)
        entry: dict[str, Any] = {"raters": [r.raters[a], r.raters[b]], "n": int(both.sum()),
                                 "disagreements": int((gap > 0).sum()),
                                 "max_gap": int(gap.max()) if gap.size else None}
        entry["qwk"] = _interval(lambda v: qwk(v[:, 0], v[:, 1], K), np.stack([va, vb], axis=1),
                                 B, seed) if both.sum() else {"value": None, "ci": [None, None]}
        pairs.append(entry)
    alpha = _interval(lambda v: krippendorff_alpha(v.T, "ordinal"), r.values, B, seed)
    fleiss = _interval(lambda v: fleiss_kappa(ratings=v, k=K), r.values, B, seed)
    return {"source": r.source, "raters": r.raters, "n_items": len(r.items),
            "n_ratings": int((~np.isnan(r.values)).sum()), "bootstrap": B, "seed": seed,
            "pairwise_qwk": pairs, "krippendorff_alpha_ordinal": alpha, "fleiss_kappa": fleiss}


def _fmt(cell: dict[str, Any]) -> str:
    v, (lo, hi) = cell["value"], cell["ci"]
    if v is None:
        return "undefined"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{v:.3f}"


def summary_lines(res: dict[str, Any]) -> list[str]:
    out = [(f"{res['n_items']} items, {len(res['raters'])} raters ({', '.join(res['raters'])}), "
           f"{res['n_ratings']} ratings; 95% bootstrap intervals over items "
           f"(B={res['bootstrap']}, seed {res['seed']})")]
    out.append("pairwise quadratic-weighted kappa:")
    for p in res["pairwise_qwk"]:
        out.append(f"  {p['raters'][0]} - {p['raters'][1]}: {_fmt(p['qwk'])}  (n {p['n']}, "
                   f"{p['disagreements']} disagreements, largest gap {p['max_gap']})")
    out.append(f"Krippendorff's alpha (ordinal): {_fmt(res['krippendorff_alpha_ordinal'])}")
    out.append(f"Fleiss' kappa: {_fmt(res['fleiss_kappa'])}")
    return out


def write_json(res: dict[str, Any], path: str | Path) -> None:
    from carebench.fileio import atomic_write_text

    atomic_write_text(Path(path), json.dumps(res, indent=2) + "\n")

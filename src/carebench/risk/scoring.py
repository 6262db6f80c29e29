"""From prediction records to ``metrics.json``: the only place risk numbers are computed.

Both a fresh run and ``carebench report DIR`` call :func:`score_records` on the records
as written, so a re-rendered report reproduces the run's numbers exactly.

Failure policy (docs/risk.md): a failed prediction (parse failure, empty, filtered, error,
budget stop) is never dropped silently. ``wrong`` (default) scores it as wrong in every
metric by giving it the level farthest from gold (the worst case for the ordinal
metrics); ``drop`` leaves it out. Either way each method's failure count is reported.
Items a method deliberately does not score (few-shot exemplars, status ``excluded``)
are neither failures nor scored.

A method that fails on more than ``max_failure_share`` of its items (default 20%: a
bad key, a wrong model name, an unparsable output format) is *flagged*: its numbers
are kept but it is left out of "best by macro-F1" and the paired comparisons, and the
report opens with a warning naming it and its commonest failure reasons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from carebench.jsonclean import jsonable
from carebench.risk.deployment import (
    DEFAULT_BUDGETS,
    DEFAULT_POSITIVE,
    DEFAULT_PRIORS,
    deployment_metrics,
)
from carebench.risk.engagement import method_engagement
from carebench.risk.scale import LEVEL_NAMES, K, farthest_level
from carebench.stats.bootstrap import bootstrap_metrics, paired_metric_bootstrap
from carebench.stats.chance import chance_baseline
from carebench.stats.classification import confusion_matrix, per_class_prf
from carebench.stats.metrics import RISK_METRICS
from carebench.stats.stratified import weighted_metric_bootstrap
from carebench.system_names import system_identity
from carebench.types import CarebenchError

METRIC_KEYS = tuple(RISK_METRICS)  # accuracy ... over_triage, in the order
TABLE2_METRICS = ("accuracy", "macro_f1", "weighted_f1", "qwk", "mae", "adjacent_accuracy",
                  "high_risk_f1")
PAIRED_METRICS = ("macro_f1", "qwk", "mae", "accuracy")
FAILURE_POLICIES = ("wrong", "drop")
#: a method failing on more than this share of its items is flagged, not ranked
DEFAULT_MAX_FAILURE_SHARE = 0.20
TOP_REASONS = 3
EXCLUDED = "excluded"


def method_order(records: Sequence[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        seen.setdefault(r["method"], None)
    return list(seen)


def system_identities(records: Sequence[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, str]:
    """Each record name's full system name (``carebench.system_names``): the method and
    options the manifest lists under that name, the model spec its records hold (none for a
    method whose records name no model, even when the run had a --model), and the request
    options the run set for that model. A run that recorded none of these keeps
    the record name."""
    entries = {m.get("name"): m for m in manifest.get("methods") or [] if isinstance(m, Mapping)}
    model_options = (manifest.get("config") or {}).get("model_options") or {}
    out: dict[str, str] = {}
    for name in method_order(records):
        e = entries.get(name)
        model = next((r.get("model") for r in records if r["method"] == name and r.get("model")), None)
        if e is None:
            out[name] = system_identity(name, None, model)
            continue
        spec = model  # a method that made no model call (tfidf-lr beside --model) names no model
        opts = model_options.get(e.get("model")) or model_options.get(spec) if spec else None
        options = dict(e.get("options") or {})
        if e.get("voter_models"):  # a vote's panel is part of what it is
            options["voters"] = list(e["voter_models"])
        out[name] = system_identity(e.get("method") or name, options, spec, opts)
    return out


def items_of(records: Sequence[dict[str, Any]]) -> tuple[list[str], dict[str, int], dict[str, Any]]:
    """(item ids in first-seen order, gold by id, group by id)."""
    gold: dict[str, int] = {}
    group: dict[str, Any] = {}
    for r in records:
        iid = str(r["item_id"])
        g = int(r["gold"])
        if gold.setdefault(iid, g) != g:
            raise CarebenchError(f"records disagree on the gold level of item {iid!r}")
        group.setdefault(iid, r.get("group"))
    return list(gold), gold, group


def resampling_groups(ids: Sequence[str], group: dict[str, Any]) -> list[str] | None:
    """Cluster labels when the data has groups shared by several items, else None."""
    if all(group.get(i) is None for i in ids):
        return None
    labels = [str(group[i]) if group.get(i) is not None else f"item:{i}" for i in ids]
    return labels if len(set(labels)) < len(labels) else None


def _scored_vectors(
    rows: list[dict[str, Any]], policy: str
) -> tuple[list[str], np.ndarray, np.ndarray, Counter]:
    """(ids, gold, pred) of the items a method is scored on, and its failures by status."""
    ids, y, p = [], [], []
    failures: Counter = Counter()
    for r in rows:
        if r["status"] == EXCLUDED:
            continue
        ok = r["status"] == "ok" and r.get("pred") is not None
        if not ok:
            failures[r["status"] if r["status"] != "ok" else "missing_pred"] += 1
            if policy == "drop":
                continue
        gold = int(r["gold"])
        ids.append(str(r["item_id"]))
        y.append(gold)
        p.append(int(r["pred"]) if ok else farthest_level(gold))
    return ids, np.asarray(y, int), np.asarray(p, int), failures


def _cost(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 3 numbers: mean tokens per item (calls made), $ per 1,000 items, median latency."""
    rows = [r for r in rows if r["status"] != EXCLUDED]
    called = [r for r in rows if (r.get("n_calls") or 0) > 0]
    tokens = [
        (r.get("usage") or {}).get("prompt_tokens", 0) + (r.get("usage") or {}).get("completion_tokens", 0)
        for r in called
    ]
    lat = [float(r.get("latency_s") or 0.0) for r in rows]
    # a call to a model without a price has cost None: the method's cost is then unknown
    unpriced = any(r.get("cost_usd") is None for r in called)
    return {
        "n_calls": int(sum(int(r.get("n_calls") or 0) for r in rows)),
        "mean_tokens": float(np.mean(tokens)) if called else None,
        # hidden reasoning (already inside the completion tokens and their cost)
        "mean_reasoning_tokens": float(np.mean([(r.get("usage") or {}).get("reasoning_tokens", 0)
                                                for r in called])) if called else None,
        "usd_per_1k": float(np.mean([float(r.get("cost_usd") or 0.0) for r in rows]) * 1000)
        if rows and not unpriced else None,
        "unpriced": unpriced,
        # service time (request sent to answer received), never the wait for a free slot
        "median_latency_s": float(np.median(lat)) if rows and any(lat) else None,
        "median_queue_wait_s": float(np.median([float(r.get("queue_wait_s") or 0.0) for r in called]))
        if called else None,
    }


def failure_reasons(rows: list[dict[str, Any]], top: int = TOP_REASONS) -> list[list[Any]]:
    """The commonest ``[status: error, count]`` pairs among a method's failed records."""
    reasons: Counter = Counter()
    for r in rows:
        if r["status"] in ("ok", EXCLUDED):
            continue
        err = str((r.get("detail") or {}).get("error") or "").strip().splitlines()
        reasons[f"{r['status']}: {err[0][:200]}" if err else r["status"]] += 1
    return [[k, int(v)] for k, v in reasons.most_common(top)]


def _warnings(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Missing-evidence notes the method recorded, with the number of items each hit."""
    out: Counter = Counter()
    for r in rows:
        for w in (r.get("detail") or {}).get("warnings") or []:
            out[str(w)] += 1
    return dict(out.most_common())


def _chance(counts: list[int]) -> dict[str, Any]:
    return {k: jsonable(float(v)) for k, v in chance_baseline(counts).items()}


def score_records(
    records: Sequence[dict[str, Any]],
    *,
    failures: str = "wrong",
    B: int = 2000,
    seed: int = 42,
    alpha: float = 0.05,
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
    incomplete: Sequence[str] = (),
    priors: Sequence[float] | None = None,
    budgets: Sequence[float] | None = None,
    positive: str = DEFAULT_POSITIVE,
    net_benefit_pt: float | None = None,
    population: str | None = None,
) -> dict[str, Any]:
    """Every reported number, in the ``metrics.json`` shape docs/risk.md describes (plus extra keys).

    Methods in ``incomplete`` (cut short by the run's budget) are not scored: their
    entry says ``incomplete`` with how many items finished, and nothing else, so a
    budget stop is never counted as the method's failures.

    Severity is scored on the suicide-related items only; records of a negative stratum
    (``negative``), and ``priors`` or ``budgets`` when given, add the ``deployment`` key
    (detection, precision at an alert budget: :mod:`carebench.risk.deployment`). Records
    with ``weight`` or ``stratum`` make the severity metrics Horvitz-Thompson weighted with
    a within-stratum bootstrap; records with neither are scored exactly as before.
    ``population`` says what the weights stand for (the data's sidecar ``population``)."""
    if failures not in FAILURE_POLICIES:
        raise CarebenchError(f"--failures must be one of {', '.join(FAILURE_POLICIES)}")
    if not 0.0 <= max_failure_share <= 1.0:
        raise CarebenchError(f"--max-failure-share must lie in [0, 1], got {max_failure_share}")
    if not records:
        raise CarebenchError("no prediction records to score")
    all_records = records
    records = [r for r in records if r.get("gold") is not None]
    if not records:
        raise CarebenchError("no suicide-related items to score: every item is negative")
    design = record_design(all_records)
    ids, gold, group = items_of(records)
    counts = Counter(gold.values())
    label_counts = {name: int(counts.get(i, 0)) for i, name in enumerate(LEVEL_NAMES)}
    all_counts = [counts.get(i, 0) for i in range(K)]
    chance = _chance(all_counts)
    by_method: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_method.setdefault(r["method"], []).append(r)

    methods: dict[str, Any] = {}
    vectors: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}
    clustered = False
    for name in method_order(records):
        rows = by_method[name]
        if name in incomplete:
            methods[name] = {"status": "incomplete", "n_finished": len(rows), "cost": _cost(rows),
                             **{m: {"value": None, "ci": [None, None]} for m in METRIC_KEYS}}
            continue
        sid, y, p, fails = _scored_vectors(rows, failures)
        vectors[name] = (sid, y, p)
        entry: dict[str, Any] = {}
        if len(sid) and design["weighted_design"]:
            boot = weighted_metric_bootstrap(
                y, p, K, [design["weight"].get(i, 1.0) for i in sid],
                [design["stratum"].get(i, "") for i in sid], names=list(METRIC_KEYS), B=B, seed=seed,
                alpha=alpha)
        elif len(sid):
            groups = resampling_groups(sid, group)
            clustered = clustered or groups is not None
            boot = bootstrap_metrics(y, p, K, names=list(METRIC_KEYS), B=B, seed=seed, alpha=alpha,
                                     groups=groups)
        if len(sid):
            for m in METRIC_KEYS:
                entry[m] = {"value": jsonable(boot[m]["value"]),
                            "ci": [jsonable(boot[m]["ci"][0]), jsonable(boot[m]["ci"][1])]}
            _, _, f1, _ = per_class_prf(y, p, K)
            entry["per_class_f1"] = [jsonable(float(v)) for v in f1]
            entry["confusion"] = confusion_matrix(y, p, K).astype(int).tolist()
        else:
            for m in METRIC_KEYS:
                entry[m] = {"value": None, "ci": [None, None]}
            entry["per_class_f1"] = [None] * K
            entry["confusion"] = [[0] * K for _ in range(K)]
        own = np.bincount(y, minlength=K).tolist() if len(sid) else [0] * K
        # the chance row must match the items scored (few-shot holds out its pool,
        # 'drop' removes failures): a method scored on other items gets its own row
        entry["chance"] = _chance(own) if len(sid) and own != all_counts else None
        entry["scored_label_counts"] = dict(zip(LEVEL_NAMES, own, strict=True))
        entry["failures"] = int(sum(fails.values()))
        entry["failures_by_status"] = dict(sorted(fails.items()))
        entry["n_scored"] = len(sid)
        entry["n_excluded"] = sum(1 for r in rows if r["status"] == EXCLUDED)
        attempted = len(rows) - entry["n_excluded"]
        entry["n_attempted"] = attempted
        entry["failure_share"] = entry["failures"] / attempted if attempted else None
        entry["flagged"] = bool(attempted and entry["failures"] > max_failure_share * attempted)
        entry["top_failure_reasons"] = failure_reasons(rows)
        entry["warnings"] = _warnings(rows)
        folds = {int(f) for r in rows if (f := (r.get("detail") or {}).get("fold")) is not None}
        entry["n_folds"] = len(folds - {-1}) if folds - {-1} else None  # None: no CV
        entry["cost"] = _cost(rows)
        entry["status"] = "complete"
        # how the answers were read and who voted: shown beside the method's name
        details = [r.get("detail") or {} for r in rows]
        entry["decoding"] = next((d["decoding"] for d in details if d.get("decoding")), None)
        entry["panel"] = next((d["panel"] for d in details if d.get("panel")), None)
        # how often the model's own reply was empty or a refusal (methods whose records hold one)
        rgroups = resampling_groups([str(r["item_id"]) for r in rows], group)
        engagement = method_engagement(rows, B=B, seed=seed, alpha=alpha, groups=rgroups)
        if engagement is not None:
            entry["engagement"] = engagement
        methods[name] = entry

    flagged = [m for m in methods if methods[m].get("flagged")]
    scored = [m for m in methods
              if methods[m]["macro_f1"]["value"] is not None and not methods[m].get("flagged")]
    for name in incomplete:  # cut short before finishing a single item
        methods.setdefault(name, {"status": "incomplete", "n_finished": 0, "cost": _cost([]),
                                  **{m: {"value": None, "ci": [None, None]} for m in METRIC_KEYS}})
    best = max(scored, key=lambda m: methods[m]["macro_f1"]["value"]) if scored else None
    paired: dict[str, Any] = {}
    if best is not None:
        bid, _, bp = vectors[best]
        bpos = {i: j for j, i in enumerate(bid)}
        for name in scored:
            if name == best:
                continue
            sid, y, p = vectors[name]
            common = [i for i in sid if i in bpos]
            if not common:
                continue
            pos = {i: j for j, i in enumerate(sid)}
            ya = np.array([y[pos[i]] for i in common])
            pa = np.array([p[pos[i]] for i in common])
            pb = np.array([bp[bpos[i]] for i in common])
            groups = resampling_groups(common, group)
            res = {}
            for m in PAIRED_METRICS:
                r = paired_metric_bootstrap(ya, pa, pb, K, m, B=B, seed=seed, alpha=alpha,
                                            groups=groups)
                res[m] = {"diff": jsonable(r.diff), "ci": [jsonable(r.ci[0]), jsonable(r.ci[1])],
                          "p_improve": jsonable(r.p_improve), "separated": bool(r.separated)}
            paired[name] = {"n": len(common), **res}
    settings: dict[str, Any] = {
        "failures": failures,
        "bootstrap": B,
        "seed": seed,
        "alpha": alpha,
        "resampling": "cluster (groups)" if clustered else "item",
        "best_by_macro_f1": best,
        "max_failure_share": max_failure_share,
        "flagged": flagged,
    }
    if design["weighted_design"]:
        settings["resampling"] = "within strata" if design["stratified"] else "item (weighted)"
        settings["weighted_metrics"] = list(METRIC_KEYS)
        settings["unweighted"] = ["per_class_f1", "confusion", "chance", "paired_vs_best"]
        settings["population"] = population
    out = {
        "n": len(ids),
        "label_counts": label_counts,
        "chance": chance,
        "methods": methods,
        "settings": settings,
        "paired_vs_best": {"reference": best, "comparisons": paired},
        "incomplete": list(incomplete),
    }
    if design["negatives"]:
        out["n_negative"] = design["negatives"]
    if design["negatives"] or priors is not None or budgets is not None:
        out["deployment"] = deployment_metrics(
            all_records, [m for m in methods if methods[m].get("status") == "complete"],
            failures=failures, priors=DEFAULT_PRIORS if priors is None else priors,
            budgets=DEFAULT_BUDGETS if budgets is None else budgets, positive=positive,
            net_benefit_pt=net_benefit_pt, B=B, seed=seed, alpha=alpha)
        out["deployment"]["weighted"] = design["weighted_design"]
        out["deployment"]["population"] = population
    return out


def record_design(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the records say of the sampling design: weights and strata by item, how many
    negative items, and whether the severity metrics are weighted (any weight or stratum)."""
    weight = {str(r["item_id"]): float(r["weight"]) for r in records if r.get("weight") is not None}
    stratum = {str(r["item_id"]): str(r["stratum"]) for r in records if r.get("stratum") is not None}
    negatives = len({str(r["item_id"]) for r in records if r.get("negative")})
    return {"weight": weight, "stratum": stratum, "negatives": negatives,
            "weighted_design": bool(weight or stratum), "stratified": bool(stratum)}

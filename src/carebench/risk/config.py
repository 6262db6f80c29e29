"""A risk run's configuration, method contexts and records (one per item and method).

:class:`carebench.risk.suite.RiskSuite` runs them in the run skeleton.

Order matters for the run guarantees (docs/methods.md): the data (and ``--train`` data) are
validated, every method is built and every model spec parsed before the first model
call; the run directory is written only once all predictions exist (each file
atomically), and the completion cache makes an interrupted run resumable.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.engine.options import RunOptions, run_options
from carebench.engine.run import Run
from carebench.engine.skeleton import Plan
from carebench.models.base import SpecLike, spec_texts
from carebench.risk.data import RiskDataset
from carebench.risk.methods import MethodContext, RiskItem, RiskPrediction
from carebench.risk.scoring import DEFAULT_MAX_FAILURE_SHARE, EXCLUDED
from carebench.types import CarebenchError


def spec_text(spec: SpecLike | None) -> str | None:
    """A config's model (the ``ModelSpec`` the command line or config file was parsed into,
    or a spec string) as the manifest writes it: its text; None stays None."""
    return None if spec is None else str(spec)


@dataclass
class MethodSpec:
    """One method to run: registry name, display label, its models and options."""

    method: str
    label: str | None = None
    model: SpecLike | None = None  # overrides RunConfig.model (role "default")
    moderation_model: SpecLike | None = None
    options: dict[str, Any] = field(default_factory=dict)
    voter_models: list[SpecLike] = field(default_factory=list)  # a vote's panel (roles voter1..)

    def to_dict(self) -> dict[str, Any]:
        return spec_texts(self)

    @property
    def name(self) -> str:
        return self.label or self.method


@dataclass
class RunConfig:
    data: str
    methods: list[MethodSpec]
    format: str | None = None
    model: SpecLike | None = None
    moderation_model: SpecLike | None = None
    seed: int = 42
    bootstrap: int = 2000
    train: str | None = None
    train_format: str | None = None
    failures: str = "wrong"
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE
    columns: str | dict[str, str] | None = None  # field=column mapping of --data
    train_columns: str | dict[str, str] | None = None  # the same for --train
    prompts: str | None = None  # directory replacing package prompt files
    n_folds: int = 5
    limit: int | None = None  # only the first N items of --data (a quick look, not a sample)
    #: deployment prevalences and alert budgets (None: the defaults, and only with a negative stratum)
    priors: list[float] | None = None
    alert_budgets: list[float] | None = None
    positive: str = "behavior"  # what an alert should find (risk.deployment.POSITIVES)
    net_benefit_pt: float | None = None  # threshold probability of the optional net benefit
    notes: list[str] = field(default_factory=list)  # shown in the report (e.g. skipped methods)
    #: the shared run flags (--out, --cache, --budget, --model-option, ...)
    options: RunOptions = field(default_factory=run_options)

    def to_dict(self) -> dict[str, Any]:
        d = spec_texts(self)  # the models as their spec text, as the manifest always held them
        # per-model request options where a reader of risk manifests finds them (only what is set)
        d["model_options"] = {spec: o.to_dict() for spec, o in self.options.model_options.items()}
        d["options"]["model_options"] = d["model_options"]
        return d


@dataclass
class RunOutcome:
    run_dir: Path | None
    plan: Plan | None = None
    metrics: dict[str, Any] | None = None


def log_progress(cfg: RunConfig, msg: str) -> None:
    if cfg.options.progress:
        print(msg, file=sys.stderr, flush=True)


def resolve_labels(specs: Sequence[MethodSpec], default_model: SpecLike | None) -> list[MethodSpec]:
    """Give every method a unique record name; the same method on several models gets
    ``method@model``."""
    specs = list(specs)
    if not specs:
        raise CarebenchError("no method given: pass --method NAME (e.g. --method tfidf-lr)")
    counts: dict[str, int] = {}
    for s in specs:
        counts[s.name] = counts.get(s.name, 0) + 1
    out = []
    for s in specs:
        if s.label is None and counts[s.method] > 1:
            label = s.method
            if s.options:
                label += "[" + ",".join(f"{k}={v}" for k, v in sorted(s.options.items())) + "]"
            if s.model or (default_model and len({x.model for x in specs
                                                   if x.method == s.method}) > 1):
                label += f"@{s.model or default_model}"
            s = MethodSpec(s.method, label, s.model, s.moderation_model, dict(s.options),
                           list(s.voter_models))
        out.append(s)
    names = [s.name for s in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise CarebenchError(f"method names must be unique; repeated: {', '.join(sorted(dup))}")
    return out


def method_context(spec: MethodSpec, cfg: RunConfig, run: Run, train: RiskDataset | None) -> MethodContext:
    roles: dict[str, Any] = {}
    chat = spec.model or cfg.model
    if chat:
        roles["default"] = run.model(chat)
    mod = spec.moderation_model or cfg.moderation_model
    if mod:
        roles["moderation"] = run.model(mod)
    for i, voter in enumerate(spec.voter_models, 1):
        roles[f"voter{i}"] = run.model(voter)
    return MethodContext(
        run=run, models=roles, seed=cfg.seed,
        train=None if train is None else train.items, n_folds=cfg.n_folds, get_model=run.model,
        method=spec.name, stage=spec.name,
    )


def prediction_record(pred: RiskPrediction, item: RiskItem, name: str, model: str | None) -> dict[str, Any]:
    """One ``records.jsonl`` line (item_id, method, gold, pred, status, ...; see docs/risk.md)."""
    ok = pred.status == "ok" and pred.level is not None
    return {
        "item_id": item.id,
        "method": name,
        "gold": gold_of(item),
        **design_fields(item),
        "pred": int(pred.level) if ok else None,
        "status": pred.status if pred.status != "ok" or ok else "error",
        "group": item.group,
        "model": model,
        "probs": pred.probs,
        "usage": {"prompt_tokens": pred.usage.prompt_tokens,
                  "completion_tokens": pred.usage.completion_tokens,
                  "reasoning_tokens": pred.usage.reasoning_tokens},
        "latency_s": pred.latency_s,  # service time (request sent to answer received)
        "queue_wait_s": round(pred.queue_wait_s, 6),
        "cost_usd": pred.cost_usd if pred.priced else None,  # None: unpriced, not $0
        "n_calls": pred.n_calls,
        "raw": pred.raw,
        "profile": pred.profile,
        "detail": pred.detail,
        "recovered": bool(item.meta.get("recovered", False)),
        "excerpt": excerpt(item.text),
    }


def gold_of(item: RiskItem) -> int | None:
    """The gold level a record holds: None for a negative item (no level on the scale)."""
    return None if item.negative else int(item.level)


def design_fields(item: RiskItem) -> dict[str, Any]:
    """The sampling-design keys of a record, only where the item has them (so a record of a
    simple sample is what it always was)."""
    out: dict[str, Any] = {}
    if item.negative:
        out["negative"] = True
    if item.stratum is not None:
        out["stratum"] = item.stratum
    if item.weight is not None:
        out["weight"] = item.weight
    return out


#: characters of an item's text kept in its records, for the report's per-item table
EXCERPT_CHARS = 160


def excerpt(text: str) -> str:
    """The item's text with its whitespace collapsed, cut at :data:`EXCERPT_CHARS`."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"


def excluded_record(item: RiskItem, name: str, model: str | None) -> dict[str, Any]:
    """An item the method deliberately did not score (e.g. a few-shot exemplar)."""
    return {"item_id": item.id, "method": name, "gold": gold_of(item), **design_fields(item), "pred": None,
            "status": EXCLUDED, "group": item.group, "model": model, "probs": None,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "latency_s": 0.0,
            "cost_usd": 0.0, "n_calls": 0, "raw": "", "profile": None,
            "detail": {"reason": "held out by the method (e.g. few-shot exemplar pool)"},
            "recovered": bool(item.meta.get("recovered", False)), "excerpt": excerpt(item.text)}


def collect(items: Sequence[RiskItem], preds: Sequence[RiskPrediction], name: str,
            model: str | None) -> list[dict[str, Any]]:
    """Records for every item, in item order: predicted, failed or excluded."""
    by_id: dict[str, RiskPrediction] = {}
    known = {it.id for it in items}
    for p in preds:
        if p.item_id not in known:
            raise CarebenchError(f"method {name} returned a prediction for unknown item {p.item_id!r}")
        if p.item_id in by_id:
            raise CarebenchError(f"method {name} returned two predictions for item {p.item_id!r}")
        by_id[p.item_id] = p
    return [
        prediction_record(by_id[it.id], it, name, model) if it.id in by_id
        else excluded_record(it, name, model)
        for it in items
    ]

"""Run a set of risk methods on one corpus and write a run directory.

Order matters for the run guarantees (docs/methods.md): the data (and ``--train`` data) are
validated, every method is built and every model spec parsed before the first model
call; the run directory is written only once all predictions exist (each file
atomically), and the completion cache makes an interrupted run resumable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from carebench.experiment import Execution, Plan, read_records, run_suite, stage
from carebench.models.pricing import is_priced
from carebench.report import Report
from carebench.risk.data import RiskDataset, load_dataset
from carebench.risk.methods import MethodContext, Prediction, RiskItem, make_method
from carebench.risk.prompts import prompt_set, read_prompt_dir, using_prompts
from carebench.risk.scoring import (
    DEFAULT_MAX_FAILURE_SHARE,
    EXCLUDED,
    FAILURE_POLICIES,
    score_records,
)
from carebench.run import Run, RunOptions
from carebench.run_options import run_options
from carebench.rundir import read_json
from carebench.types import CarebenchError, is_harness_failure

#: methods that need no chat model (fitted on the data or driven by moderation scores)
DEFAULT_METHODS = ("tfidf-lr",)


@dataclass
class MethodSpec:
    """One method to run: registry name, display label, its models and options."""

    method: str
    label: str | None = None
    model: str | None = None  # overrides RunConfig.model (role "default")
    moderation_model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    voter_models: list[str] = field(default_factory=list)  # a vote's panel (roles voter1..)

    @property
    def name(self) -> str:
        return self.label or self.method


@dataclass
class RunConfig:
    data: str
    methods: list[MethodSpec]
    format: str | None = None
    model: str | None = None
    moderation_model: str | None = None
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
    notes: list[str] = field(default_factory=list)  # shown in the report (e.g. skipped methods)
    #: the shared run flags (--out, --cache, --budget, --model-option, ...)
    run: RunOptions = field(default_factory=run_options)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # per-model request options where a reader of risk manifests finds them (only what is set)
        d["model_options"] = {spec: o.to_dict() for spec, o in self.run.model_options.items()}
        d["run"]["model_options"] = d["model_options"]
        return d


@dataclass
class RunOutcome:
    run_dir: Path | None
    plan: Plan | None = None
    metrics: dict[str, Any] | None = None


def _log(cfg: RunConfig, msg: str) -> None:
    if cfg.run.progress:
        print(msg, file=sys.stderr, flush=True)


def resolve_labels(specs: Sequence[MethodSpec], default_model: str | None) -> list[MethodSpec]:
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


def _context(spec: MethodSpec, cfg: RunConfig, run: Run, train: RiskDataset | None) -> MethodContext:
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


def prediction_record(pred: Prediction, item: RiskItem, name: str, model: str | None) -> dict[str, Any]:
    """One ``records.jsonl`` line (item_id, method, gold, pred, status, ...; see docs/risk.md)."""
    ok = pred.status == "ok" and pred.level is not None
    return {
        "item_id": item.id,
        "method": name,
        "gold": int(item.level),
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


#: characters of an item's text kept in its records, for the report's per-item table
EXCERPT_CHARS = 160


def excerpt(text: str) -> str:
    """The item's text with its whitespace collapsed, cut at :data:`EXCERPT_CHARS`."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"


def excluded_record(item: RiskItem, name: str, model: str | None) -> dict[str, Any]:
    """An item the method deliberately did not score (e.g. a few-shot exemplar)."""
    return {"item_id": item.id, "method": name, "gold": int(item.level), "pred": None,
            "status": EXCLUDED, "group": item.group, "model": model, "probs": None,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "latency_s": 0.0,
            "cost_usd": 0.0, "n_calls": 0, "raw": "", "profile": None,
            "detail": {"reason": "held out by the method (e.g. few-shot exemplar pool)"},
            "recovered": bool(item.meta.get("recovered", False)), "excerpt": excerpt(item.text)}


def collect(items: Sequence[RiskItem], preds: Sequence[Prediction], name: str,
            model: str | None) -> list[dict[str, Any]]:
    """Records for every item, in item order: predicted, failed or excluded."""
    by_id: dict[str, Prediction] = {}
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


class RiskSuite:
    """The risk suite in the run skeleton (:mod:`carebench.experiment`).

    All methods share one run context, so the budget caps the whole command. A
    method the budget cut short keeps the predictions it finished, is marked
    ``incomplete`` and is not scored; methods after it still run from the cache
    and without paid calls where they can.
    """

    name = "risk"

    def __init__(self, cfg: RunConfig | None = None):
        self.cfg = cfg
        self._prompt_files: dict[str, str] | None = None
        self._unpriced: list[str] = []

    def _prepare(self, run: Run):
        cfg = self.cfg
        assert cfg is not None, "a RiskSuite without a config can only score and render"
        if cfg.failures not in FAILURE_POLICIES:
            raise CarebenchError(f"--failures must be one of {', '.join(FAILURE_POLICIES)}")
        if not 0.0 <= cfg.max_failure_share <= 1.0:
            raise CarebenchError(
                f"--max-failure-share must lie in [0, 1], got {cfg.max_failure_share}")
        if cfg.bootstrap < 1:
            raise CarebenchError("--bootstrap must be at least 1")
        data = load_dataset(cfg.data, cfg.format, cfg.columns)
        if cfg.limit is not None:
            if cfg.limit < 1:
                raise CarebenchError(f"--limit must be at least 1, got {cfg.limit}")
            if cfg.limit < len(data.items):
                data = replace(data, items=data.items[:cfg.limit], notes=[*data.notes, (
                    f"--limit {cfg.limit}: only the first {cfg.limit} of {len(data.items)} items "
                    "in file order (a quick look, not a sample).")])
        train = load_dataset(cfg.train, cfg.train_format, cfg.train_columns) if cfg.train else None
        self._prompt_files = read_prompt_dir(cfg.prompts) if cfg.prompts else None
        specs = resolve_labels(cfg.methods, cfg.model)
        methods = [(s, make_method(s.method, **s.options)) for s in specs]
        for _, m in methods:  # every method's requirements (extras, encoders) before any runs
            check = getattr(m, "check_ready", None)
            if check is not None:
                check()
        contexts = [(s, m, _context(s, cfg, run, train)) for s, m in methods]
        for _, m, ctx in contexts:  # fail fast: a method needing a model must have one
            if getattr(m, "needs_model", False):
                ctx.model()
            check = getattr(m, "check", None)
            if check is not None:  # e.g. an ensemble's voter panel, before any call
                check(ctx)
        self._unpriced = [s for s in run.model_specs() if not is_priced(s)]
        return data, train, specs, contexts

    def plan(self, run: Run) -> Plan:
        data, _, _, contexts = self._prepare(run)
        with using_prompts(self._prompt_files):
            stages = [stage(run, s.name, m.calls(data.items, ctx),
                            exact=not getattr(m, "plan_is_estimate", False))
                      for s, m, ctx in contexts]
        return Plan(self.name, stages)

    def execute(self, run: Run) -> Execution:
        data, train, specs, contexts = self._prepare(run)
        with using_prompts(self._prompt_files):
            return self._execute(run, data, train, specs, contexts)

    def _execute(self, run: Run, data: RiskDataset, train: RiskDataset | None,
                 specs: list[MethodSpec], contexts: list[Any]) -> Execution:
        cfg = self.cfg
        assert cfg is not None
        records: list[dict[str, Any]] = []
        harness_failures: dict[str, int] = {}  # method -> calls that failed every retry
        t0 = time.perf_counter()
        for s, m, ctx in contexts:
            _log(cfg, f"risk: {s.name} on {len(data.items)} items")
            not_made, logged = run.ledger.not_made, len(run.call_rows)
            preds = m.predict(data.items, ctx)
            model_spec = str(ctx.models["default"].spec) if "default" in ctx.models else None
            rows = collect(data.items, preds, s.name, model_spec)
            failed = sum(is_harness_failure(c["completion"].get("error")) for c in run.call_rows[logged:])
            if failed:  # the harness failed, not the model: the method is incomplete, never scored
                harness_failures[s.name] = failed
                run.incomplete[s.name] = f"{failed} call(s) failed after every retry"
            if run.ledger.not_made > not_made:  # cut short: keep only what finished
                run.mark_incomplete(s.name)
                rows = [r for r in rows if r["status"] != "budget"]
            records += rows
        elapsed = time.perf_counter() - t0
        return Execution(
            records=records, config=cfg.to_dict(), dataset=data.describe(),
            seeds={"seed": cfg.seed, "bootstrap_seed": cfg.seed, "cv_seed": cfg.seed},
            extra={
                "train_dataset": None if train is None else train.describe(),
                "unpriced_models": self._unpriced,
                "prompts": prompt_set(cfg.prompts),
                "methods": [{"name": s.name, "method": s.method, "model": s.model or cfg.model,
                             "options": s.options, "voter_models": s.voter_models}
                            for s in specs],
                "output_modes": run.output_modes(),
                "run": {"elapsed_s": round(elapsed, 3)},
                "harness_failures": harness_failures,
            },
            # a re-run of the same command retries exactly the failed calls (never cached)
            failed_calls=sum(harness_failures.values()),
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        return read_records(run_dir)

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        cfg = manifest.get("config") or {}
        if not records and manifest.get("incomplete"):  # stopped before any method finished
            from carebench.experiment import incomplete_metrics

            return incomplete_metrics(manifest, {"predictions": 0})
        return score_records(
            records, failures=cfg.get("failures", "wrong"), B=int(cfg.get("bootstrap", 2000)),
            seed=int(cfg.get("seed", 42)), incomplete=manifest.get("incomplete") or [],
            max_failure_share=float(cfg.get("max_failure_share", DEFAULT_MAX_FAILURE_SHARE)),
        )

    def render(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
               manifest: Mapping[str, Any]) -> Report:
        from carebench.risk.report import build_risk_report

        if metrics.get("status") == "incomplete" and not records:
            from carebench.experiment import incomplete_report

            return incomplete_report("Risk: graded severity measurement", metrics)
        return build_risk_report(dict(metrics), records, dict(manifest))


def run_experiment(cfg: RunConfig) -> RunOutcome:
    """Validate, predict with every method, score, and write the run directory."""
    out = run_suite(RiskSuite(cfg), cfg.run)
    if isinstance(out, Plan):
        return RunOutcome(None, plan=out)
    return RunOutcome(out, metrics=read_json(out / "metrics.json"))


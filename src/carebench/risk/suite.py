"""The risk suite's objects in the run skeleton (:mod:`carebench.engine.skeleton`).

:class:`RiskSuite` runs a set of methods on one corpus; :class:`SweepSuite` runs the
few-shot k sweep (Beyond the Flag, Appendix G, Figure 4) as an ordinary risk run:
one method per arm, scored and rendered like any risk run (the manifest's ``sweep``
key adds the sweep table and Figure 4). Both write their run directory through
:func:`carebench.engine.skeleton.run_suite`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from carebench.compare.outline import write_outline
from carebench.engine.run import Run
from carebench.engine.rundir import read_json
from carebench.engine.skeleton import (
    Execution,
    Plan,
    incomplete_metrics,
    incomplete_report,
    read_records,
    run_suite,
    stage,
)
from carebench.models.base import SpecLike
from carebench.models.pricing import is_priced
from carebench.report import Report
from carebench.risk.compare import RiskComparer
from carebench.risk.config import (
    MethodSpec,
    RunConfig,
    RunOutcome,
    collect,
    log_progress,
    method_context,
    resolve_labels,
    spec_text,
)
from carebench.risk.data import RiskDataset, load_dataset
from carebench.risk.deployment import DEFAULT_POSITIVE, check_deployment_options
from carebench.risk.methods import MethodContext, make_method
from carebench.risk.methods.llm import POOL_PER_LEVEL, FewShotMethod
from carebench.risk.prompts import prompt_set, read_prompt_dir, using_prompts
from carebench.risk.report import arm_name, build_risk_report, risk_headline
from carebench.risk.scoring import DEFAULT_MAX_FAILURE_SHARE, FAILURE_POLICIES, score_records
from carebench.risk.sweep import SWEEP_KS, fewshot_sweep
from carebench.types import CarebenchError, is_harness_failure


class RiskSuite:
    """The risk suite in the run skeleton (:mod:`carebench.engine.skeleton`).

    All methods share one run context, so the budget caps the whole command. A
    method the budget cut short keeps the predictions it finished, is marked
    ``incomplete`` and is not scored; methods after it still run from the cache
    and without paid calls where they can.
    """

    name = "risk"


    def outline(self, run_dir: Path) -> None:
        """``comparison.json``, so leaderboards read this run in full only when they keep a system of it."""
        write_outline(run_dir, RiskComparer())

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
        check_deployment_options(cfg.priors, cfg.alert_budgets, cfg.positive, cfg.net_benefit_pt)
        data = load_dataset(cfg.data, cfg.format, cfg.columns)
        if cfg.limit is not None:
            if cfg.limit < 1:
                raise CarebenchError(f"--limit must be at least 1, got {cfg.limit}")
            if cfg.limit < len(data.items):
                data = replace(data, items=data.items[:cfg.limit], notes=[*data.notes, (
                    f"--limit {cfg.limit}: only the first {cfg.limit} of {len(data.items)} items "
                    "in file order (a quick look, not a sample).")])
        train = load_dataset(cfg.train, cfg.train_format, cfg.train_columns) if cfg.train else None
        if train is not None and train.has_negatives:
            raise CarebenchError(f"--train {cfg.train}: negative items cannot train a severity "
                                 "method; give the training corpus without them")
        self._prompt_files = read_prompt_dir(cfg.prompts) if cfg.prompts else None
        specs = resolve_labels(cfg.methods, cfg.model)
        methods = [(s, make_method(s.method, **s.options)) for s in specs]
        for _, m in methods:  # every method's requirements (extras, encoders) before any runs
            check = getattr(m, "check_ready", None)
            if check is not None:
                check()
        contexts = [(s, m, method_context(s, cfg, run, train)) for s, m in methods]
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
            log_progress(cfg, f"risk: {s.name} on {len(data.items)} items")
            not_made, logged = run.ledger.not_made, len(run.call_rows)
            preds = predict_with_negatives(m, data.items, ctx)
            # the model a method asked (a supervised or moderation method beside --model asked none)
            model_spec = (str(ctx.models["default"].spec)
                          if getattr(m, "needs_model", False) and "default" in ctx.models else None)
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
                "methods": [{"name": s.name, "method": s.method, "model": spec_text(s.model or cfg.model),
                             "options": s.options, "voter_models": [str(v) for v in s.voter_models]}
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
            return incomplete_metrics(manifest, {"predictions": 0})
        return score_records(
            records, failures=cfg.get("failures", "wrong"), B=int(cfg.get("bootstrap", 2000)),
            seed=int(cfg.get("seed", 42)), incomplete=manifest.get("incomplete") or [],
            max_failure_share=float(cfg.get("max_failure_share", DEFAULT_MAX_FAILURE_SHARE)),
            priors=cfg.get("priors"), budgets=cfg.get("alert_budgets"),
            positive=cfg.get("positive") or DEFAULT_POSITIVE, net_benefit_pt=cfg.get("net_benefit_pt"),
            population=((manifest.get("dataset") or {}).get("design") or {}).get("population"),
        )

    def render(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
               manifest: Mapping[str, Any]) -> Report:
        if metrics.get("status") == "incomplete" and not records:
            return incomplete_report("Risk: graded severity measurement", metrics)
        return build_risk_report(dict(metrics), records, dict(manifest))

    def headline(self, metrics: Mapping[str, Any], records: list[dict[str, Any]], manifest: Mapping[str, Any]):

        return risk_headline(metrics, records, manifest)


def predict_with_negatives(method: Any, items: Sequence[Any], ctx: MethodContext) -> list[Any]:
    """The method's predictions for every item; a negative stratum apart.

    The suicide-related items are predicted exactly as they would be without a negative
    stratum (same folds, same few-shot pool), so the severity results do not move when one
    is added. The negative items are then predicted as new data: a fitted method is fitted on
    the suicide-related items (or on ``--train``), as the seed trains it, so no negative item
    is ever seen in training."""
    related = [it for it in items if not it.negative]
    negatives = [it for it in items if it.negative]
    if not negatives:
        return method.predict(items, ctx)
    preds = list(method.predict(related, ctx)) if related else []
    fit_on = ctx.train if ctx.train is not None else related
    return preds + list(method.predict(negatives, replace(ctx, train=fit_on)))


def run_experiment(cfg: RunConfig) -> RunOutcome:
    """Validate, predict with every method, score, and write the run directory."""
    out = run_suite(RiskSuite(cfg), cfg.options)
    if isinstance(out, Plan):
        return RunOutcome(None, plan=out)
    return RunOutcome(out, metrics=read_json(out / "metrics.json"))


class SweepSuite:
    """The sweep as a run of the skeleton; scores and renders like any risk run."""

    name = "risk"

    def __init__(self, data: str, model: SpecLike, *, format: str | None = None,
                 ks: Sequence[int] = SWEEP_KS, pool_per_level: int = POOL_PER_LEVEL,
                 train: str | None = None, train_format: str | None = None, seed: int = 42,
                 bootstrap: int = 2000, failures: str = "wrong"):
        self.data, self.model, self.format = data, model, format
        self.ks = sorted({int(k) for k in ks} | {0})
        self.pool_per_level, self.train, self.train_format = pool_per_level, train, train_format
        self.seed, self.bootstrap, self.failures = seed, bootstrap, failures

    def _prepare(self, run: Run):
        data = load_dataset(self.data, self.format)
        train = load_dataset(self.train, self.train_format) if self.train else None
        if data.has_negatives or (train is not None and train.has_negatives):
            raise CarebenchError("the few-shot sweep measures severity only: give data without "
                                 "negative items")
        ctx = MethodContext(run=run, models={"default": run.model(self.model)},
                            seed=self.seed, train=None if train is None else train.items,
                            get_model=run.model, stage="few-shot sweep")
        return data, ctx

    def plan(self, run: Run) -> Plan:
        data, ctx = self._prepare(run)
        return Plan(self.name, [stage(run, arm_name(k), FewShotMethod(
            k=k, pool_per_level=self.pool_per_level).calls(data.items, ctx)) for k in self.ks])

    def execute(self, run: Run) -> Execution:
        data, ctx = self._prepare(run)
        res = fewshot_sweep(data.items, ctx, self.ks, self.pool_per_level, self.failures,
                            self.bootstrap, figure=False)
        records = res.records
        cut = sorted({r["method"] for r in records if r["status"] == "budget"},
                     key=lambda m: int(m.split("=")[1]))
        for arm in cut:
            run.mark_incomplete(arm)
        records = [r for r in records if r["status"] != "budget"]
        config = {"data": self.data, "format": self.format, "model": str(self.model), "ks": self.ks,
                  "pool_per_level": self.pool_per_level, "train": self.train,
                  "failures": self.failures, "bootstrap": self.bootstrap, "seed": self.seed}
        return Execution(records=records, config=config, dataset=data.describe(),
                         seeds={"seed": self.seed},
                         extra={"kind": "sweep", "sweep": {"ks": self.ks, "pool_size": len(res.pool_ids)}})

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        return RiskSuite().read_records(run_dir, manifest)

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return RiskSuite().score(records, manifest)

    def render(self, metrics, records, manifest):
        return RiskSuite().render(metrics, records, manifest)

    def headline(self, metrics, records, manifest):
        return RiskSuite().headline(metrics, records, manifest)

"""What the plural commands share: their options, the run context's settings, and
the rule that turns one batch of calls into answers a profile method may use.

Every plural command runs through one :class:`carebench.engine.run.Run` (runner, cache,
run-wide budget, ``calls.jsonl``, models) and the experiment skeleton
(:func:`carebench.engine.skeleton.run_suite`). A profile method needs every answer of
a round before it can go on (GEPA's next candidate, the guidelines distilled from
the traces), so :func:`answered` makes a round all or nothing: a round the budget
cut short raises :class:`CutShort` (the command marks that work ``incomplete``),
and a call that failed after its retries raises :class:`HarnessFailure`, which
stops the command with one line; a failed call is never scored as the model's
answer, and re-running retries it (completed calls come from the cache).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.engine.options import RunOptions, run_options
from carebench.engine.rundir import read_jsonl, run_dir_path
from carebench.engine.runner import CallPlan, RunResult, capped_request
from carebench.models.base import SpecLike, spec_texts
from carebench.types import CarebenchError, Completion

SUITE = "plural"


class HarnessFailure(CarebenchError):
    """A model call failed after its retries; its case cannot be scored."""


class CutShort(Exception):
    """The run's budget refused some calls of a round; the round's work is incomplete."""


def answered(res: RunResult, description: str) -> list[Completion]:
    """Every completion of a batch, in call order, or :class:`CutShort` /
    :class:`HarnessFailure` (see the module docstring)."""
    if res.not_made:
        raise CutShort(f"{description}: {res.not_made} of {len(res.completions)} calls not made ({res.stopped})")
    failed = [c for c in res.completions if c is not None and c.status == "error"]
    if failed:
        raise HarnessFailure(
            f"{len(failed)} of {len(res.completions)} {description} failed (first: {failed[0].error}); "
            "re-run the same command to retry them (completed calls are cached)"
        )
    return [c for c in res.completions if c is not None]


@dataclass
class CommandOptions:
    """The options of the calibrate / freeze / label commands."""

    model: SpecLike | None = None  # the ModelSpec the command line was parsed into
    seed: int = 12345
    embedder: str | None = None
    taxonomy: str | None = None
    contexts: str | None = None
    memalign_backend: str | None = None  # E4/E5 guideline distillation: native (default) or mlflow
    #: the shared run flags (--out, --cache, --budget, ...)
    options: RunOptions = field(default_factory=run_options)

    def manifest_config(self) -> dict[str, Any]:
        """The options as the manifest's ``config`` holds them: plain JSON, the model as spec text."""
        return spec_texts(self)


def no_call_options() -> RunOptions:
    """The run options of a command that calls no model (no cache opened, no progress bar)."""
    return run_options(no_cache=True, progress=False)


def out_dir(command: str, out: str | Path | None) -> Path:
    """``--out`` or ``runs/plural-<command>-<time>`` (checked, not created)."""
    return run_dir_path(f"{SUITE}-{command}" if command != "run" else SUITE, out)


def run_plural_command(suite: Any, cfg: Any, command: str, cache: Any = None) -> Any:
    """Run (or plan) one plural command on the skeleton: one run context (``cfg.options``), the
    run directory, ``carebench report``-compatible metrics and report, exit 3 on a stop."""
    from carebench.engine.skeleton import run_suite

    return run_suite(suite, cfg.options, out=out_dir(command, cfg.options.out), cache=cache)


def estimated_stage(name: str, like: Sequence[Any], n: int) -> Any:
    """A dry-run stage whose requests depend on answers not yet made (guidelines,
    demonstrations, GEPA's candidates): ``n`` calls, each costed at the worst case
    (full output cap) of the mean of ``like``, requests of the same shape; never
    counted as cached. ``exact`` is False."""
    from carebench.engine.skeleton import PlanStage
    from carebench.models.pricing import call_cost_bound, is_priced

    by_model: dict[str, dict[str, Any]] = {}
    cost = 0.0
    if like and n:
        spec = str(like[0].model.spec)
        priced = is_priced(spec)
        each = (sum(call_cost_bound(spec, capped_request(c)) for c in like) / len(like)) if priced else 0.0
        cost = each * n
        by_model[spec] = {"calls": n, "cached": 0, "estimated_cost_usd": cost, "reply_lengths": "output caps",
                          **({} if priced else {"priced": False})}
    return PlanStage(name, CallPlan(n, 0, n, cost, by_model), exact=False)


class PluralCommand:
    """What every plural command's skeleton object shares: a config (none: score and render only),
    records that are plain ``records.jsonl`` rows, and the generic report of a run the
    budget cut short. A subclass sets ``title`` and writes ``full_report``."""

    name = SUITE
    title = "Plural"

    def __init__(self, cfg: Any = None):
        self.cfg = cfg

    def config(self) -> Any:
        assert self.cfg is not None, f"a {type(self).__name__} without a config can only score and render"
        return self.cfg

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> Any:
        return read_jsonl(Path(run_dir) / "records.jsonl")

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.engine.skeleton import incomplete_report

        if metrics.get("status") == "incomplete":
            return incomplete_report(self.title, metrics)
        return self.full_report(metrics, records, manifest)

    def full_report(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        raise NotImplementedError

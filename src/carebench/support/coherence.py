"""The multi-turn coherence gate (DistressBench A.5): do the scripted user turns still follow?

User turns are fixed while assistant turns are regenerated (§3.1), so a script can
break when a model's reply takes the conversation somewhere the next prepared
message no longer fits. DistressBench checked 18 multi-turn tasks across four models
before its runs and required at least 90% acceptable transitions.

``carebench support coherence`` samples multi-turn tasks (default 18, seed 12345: a
carebench default, the paper names none), regenerates their assistant turns with
each given model, and asks a judge, for every assistant reply followed by a scripted
user turn, whether that user turn still follows. A transition whose judge answer
failed (call or parse) is counted apart and left out of the rates. A task passes when
at least ``gate`` (0.9) of its judged transitions, over all models, are acceptable.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from carebench.criteria import render_transcript
from carebench.engine.options import RunOptions, run_options
from carebench.engine.run import Run
from carebench.engine.rundir import read_jsonl, run_dir_path
from carebench.engine.skeleton import Execution, Plan, run_suite, stage
from carebench.judging import (
    JUDGE_MAX_TOKENS,
    BinaryVerdict,
    JudgeQuestion,
    ask,
    judge_calls,
    panel_seats,
)
from carebench.models.base import SpecLike
from carebench.report import Paragraph, Report, Section, Table
from carebench.report.document import Headline, Interval
from carebench.support.generation import (
    GenerationConfig,
    assumed_response,
    generate,
    planned_generation,
)
from carebench.support.records import ResponseRecord
from carebench.support.tasks import Task, load_tasks
from carebench.templates import fill, prompt
from carebench.types import CarebenchError, Message

DEFAULT_N = 18
GATE = 0.9
SAMPLE_SEED = 12345


@dataclass
class CoherenceConfig:
    tasks: str
    models: list[SpecLike]  # the command line's ModelSpec objects (text is parsed by Run.model)
    judge: SpecLike
    n: int = DEFAULT_N
    gate: float = GATE
    seed: int = SAMPLE_SEED
    notes: list[str] = field(default_factory=list)
    #: the shared run flags (--out, --cache, --budget, --concurrency, ...)
    options: RunOptions = field(default_factory=run_options)


_USER_HEAD = "CONVERSATION SO FAR\n"


@cache
def _templates() -> tuple[str, str]:
    """The judge's system text and user template: the prompt file holds both, the user
    part starting at its "CONVERSATION SO FAR" heading."""
    system, sep, user = prompt("support_coherence", keep_newline=True).partition("\n\n" + _USER_HEAD)
    if not sep:
        raise CarebenchError("support_coherence prompt lacks its CONVERSATION SO FAR section")
    return system.strip(), _USER_HEAD + user


def sample_multi_turn(tasks: Sequence[Task], n: int, seed: int) -> list[Task]:
    """``n`` multi-turn tasks drawn uniformly without replacement (all of them if fewer)."""
    multi = sorted((t for t in tasks if t.multi_turn), key=lambda t: t.id)
    if not multi:
        raise CarebenchError("the task file has no multi-turn task to check")
    if n >= len(multi):
        return multi
    pick = np.random.default_rng(seed).choice(len(multi), size=n, replace=False)
    return [multi[i] for i in sorted(pick.tolist())]


def transition_question(key: Any, turns: Sequence[dict[str, Any]], next_user: str) -> JudgeQuestion:
    system, user = _templates()
    user = fill(user, {"transcript": render_transcript(turns), "next": next_user}, "support_coherence")
    return JudgeQuestion(key, (Message("system", system), Message("user", user)), BinaryVerdict)


def summarize(rows: Sequence[dict[str, Any]], gate: float) -> dict[str, Any]:
    """Acceptable-transition rates per task, per model and per (task, model), against the gate."""
    ok = [r for r in rows if r["status"] == "ok"]
    out: dict[str, Any] = {"gate": gate, "transitions": len(rows), "judged": len(ok),
                           "not_judged": len(rows) - len(ok)}
    for key, name in (("task", "per_task"), ("model", "per_model")):
        groups: dict[str, list[bool]] = defaultdict(list)
        for r in ok:
            groups[r[key]].append(bool(r["follows"]))
        out[name] = {k: {"judged": len(v), "acceptable": sum(v), "rate": sum(v) / len(v),
                         "passes": sum(v) / len(v) >= gate} for k, v in sorted(groups.items())}
    cells: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        cells[r["task"]][r["model"]].append(bool(r["follows"]))
    out["per_task_model"] = {t: {m: sum(v) / len(v) for m, v in sorted(ms.items())} for t, ms in sorted(cells.items())}
    out["failing_tasks"] = [t for t, x in out["per_task"].items() if not x["passes"]]
    out["overall_rate"] = sum(r["follows"] for r in ok) / len(ok) if ok else float("nan")
    return out


def transition_questions(tasks: Sequence[Task], responses: Sequence[ResponseRecord]
                         ) -> tuple[list[JudgeQuestion], list[tuple[str, str, int]]]:
    """One question per assistant reply followed by a scripted user turn, and its
    (task, model, turn) key; conversations that failed (harness failures) have none."""
    questions, meta = [], []
    by_id = {t.id: t for t in tasks}
    for r in responses:
        if r.is_harness_failure:
            continue
        task = by_id[r.task_id]
        for k in range(len(task.turns) - 1):  # the assistant reply to turn k, then user turn k + 1
            upto = r.turns[: 2 * (k + 1)]
            questions.append(transition_question((r.task_id, r.responder, k + 1), upto, task.turns[k + 1]))
            meta.append((r.task_id, r.responder, k + 1))
    return questions, meta


def plan_coherence(run: Run, tasks: Sequence[Task], models: Sequence[Any], judge: Sequence[Any],
                   cfg: CoherenceConfig) -> Plan:
    """The dry run: every regeneration call (followed through the cache) and every
    transition verdict; a reply not in the cache is assumed to fill its output cap."""
    gcfg = GenerationConfig(attempts=1, seed=cfg.seed)
    gen_calls, done, exact = planned_generation(tasks, models, run.cache, gcfg)
    convs = [(m, t) for m in models for t in tasks]
    responses = []
    for r, (m, t) in zip(done, convs, strict=True):
        responses.append(r or assumed_response(t, str(m.spec), 0, gcfg.cap_for(str(m.spec))))
    questions, _ = transition_questions(tasks, responses)
    known = all(d is not None for d in done)
    return Plan("support", [
        stage(run, "generation", gen_calls, exact=exact),
        stage(run, "coherence verdicts", judge_calls(questions, judge, temperature=0.0,
                                                     max_tokens=JUDGE_MAX_TOKENS), exact=known),
    ], ["command: support coherence"] + ([] if known else [
        "replies not in the cache are assumed to fill their output cap, so the judge prompts are estimated"]))


class CoherenceSuite:
    """``support coherence`` in the run skeleton: regenerate the sampled tasks' assistant
    turns with each model, ask the judge about every transition, score from the records
    (``carebench report DIR`` recomputes the rates from ``records.jsonl``)."""

    name = "support"

    def __init__(self, cfg: CoherenceConfig | None = None):
        self.cfg = cfg

    def _prepare(self, run: Run):
        cfg = self.cfg
        assert cfg is not None, "a CoherenceSuite without a config can only score and render"
        if not cfg.models:
            raise CarebenchError("give at least one --model whose replies test the scripts")
        if not 0 < cfg.gate <= 1:
            raise CarebenchError(f"--gate must be in (0, 1], got {cfg.gate}")
        if cfg.n < 1:
            raise CarebenchError(f"--n must be at least 1, got {cfg.n}")
        tasks = sample_multi_turn(load_tasks(cfg.tasks), cfg.n, cfg.seed)
        models = [run.model(s) for s in cfg.models]
        judge = panel_seats([str(cfg.judge)], [run.model(cfg.judge)])
        return tasks, models, judge

    def plan(self, run: Run) -> Plan:
        return plan_coherence(run, *self._prepare(run), self.cfg)

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        tasks, models, judge = self._prepare(run)
        gen = generate(tasks, models, run, GenerationConfig(attempts=1, seed=cfg.seed))
        questions, meta = transition_questions(tasks, gen.responses)
        answers, _ = ask(questions, judge, run, stage="coherence verdicts", temperature=0.0,
                         max_tokens=JUDGE_MAX_TOKENS)
        rows = [{"kind": "transition", "task": t, "model": m, "after_turn": k, "judge": a.judge,
                 "follows": getattr(a.value, "met", None) if a.status == "ok" else None,
                 "status": a.status, "rationale": a.rationale}
                for (t, m, k), a in zip(meta, answers, strict=True)]
        failed_replies = sum(r.is_harness_failure for r in gen.responses)
        specs = [str(m) for m in cfg.models]
        return Execution(
            records=[r.to_dict() for r in gen.responses] + rows,
            config={**asdict(cfg), "models": specs, "judge": str(cfg.judge)},  # specs as text
            dataset={"source": cfg.tasks, "tasks": len(tasks)},
            seeds={"sample": cfg.seed}, models=[*specs, str(cfg.judge)],
            extra={"kind": "coherence", "tasks_sampled": [t.id for t in tasks]},
            # a reply that failed after every retry has no transitions: the run is incomplete
            failed_calls=failed_replies,
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        return read_jsonl(Path(run_dir) / "records.jsonl")

    def score(self, records: Sequence[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        gate = float((manifest.get("config") or {}).get("gate", GATE))
        metrics = summarize([r for r in records if r.get("kind") == "transition"], gate)
        metrics["tasks_sampled"] = list(manifest.get("tasks_sampled") or [])
        metrics["replies_not_generated"] = sum(ResponseRecord.from_dict(r).is_harness_failure
                                               for r in records if r.get("kind") == "response")
        return metrics

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        return coherence_report(dict(metrics))

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Headline:
        return coherence_headline(metrics)


def run_coherence(cfg: CoherenceConfig, cache_obj: Any = None) -> Path | Plan:
    """``support coherence``: the run directory (default ``runs/support-coherence-<time>``)
    or, for a dry run, the plan."""
    out = cfg.options.out if cfg.options.out is not None else run_dir_path("support-coherence")
    return run_suite(CoherenceSuite(cfg), cfg.options, out=out, cache=cache_obj)


def coherence_headline(m: Mapping[str, Any]) -> Headline:
    """The gate's decision (A.5: every sampled task at or above the gate), the acceptable
    share over all judged transitions, and what limits it: unjudged transitions, replies
    not generated, a small sample."""
    gate, tasks = float(m["gate"]), m.get("per_task") or {}
    failing = list(m.get("failing_tasks") or [])
    if not tasks:
        verdict = "Gate not decided: no transition was judged"
    elif failing:
        verdict = f"Gate failed: {len(failing)} of {len(tasks)} tasks below {gate:.0%} acceptable transitions"
    else:
        verdict = f"Gate passed: all {len(tasks)} tasks at or above {gate:.0%} acceptable transitions"
    rate = m.get("overall_rate")
    value = None if rate is None or math.isnan(float(rate)) else float(rate)  # NaN: nothing judged
    caveats = []
    if tasks and len(tasks) < DEFAULT_N:
        caveats.append(f"small n: {len(tasks)} task{'s' if len(tasks) != 1 else ''} checked (A.5 checked "
                       f"{DEFAULT_N}); a script that breaks elsewhere would go unseen")
    if failing:
        caveats.append("tasks below the gate: " + ", ".join(map(str, failing)))
    if m.get("not_judged"):
        caveats.append(f"incomplete: {m['not_judged']} of {m['transitions']} transitions have no judge answer "
                       "and are left out of the rates")
    if m.get("replies_not_generated"):
        caveats.append(f"incomplete: {m['replies_not_generated']} conversations were not generated (harness "
                       "failures), so their transitions were never judged")
    rows = [(str(k), f"{x['rate']:.3f} ({x['acceptable']} of {x['judged']} transitions acceptable)")
            for k, x in (m.get("per_model") or {}).items()]
    return Headline(verdict, measure="acceptable transitions (share of judged transitions, 0 to 1, higher is better)"
                    if value is not None else None, value=Interval(value) if value is not None else None,
                    n=int(m.get("judged") or 0) if value is not None else None, unit="transitions",
                    rows=rows, caveats=caveats)


def coherence_report(m: dict[str, Any]) -> Report:
    gate = m["gate"]
    models = list(m.get("per_model") or {})
    return Report(
        title="Support: multi-turn coherence gate",
        subtitle=f"{len(m.get('tasks_sampled', []))} tasks, {len(models)} models, gate {gate:.0%}",
        sections=[
            Section("Gate", [Paragraph(
                f"A.5: a scripted user turn must still follow the regenerated assistant reply before it. "
                f"{m['judged']} of {m['transitions']} transitions judged ({m['not_judged']} judge answers failed "
                f"and are left out); overall {m['overall_rate']:.1%} acceptable. Tasks below the {gate:.0%} gate: "
                + (", ".join(m["failing_tasks"]) or "none") + ".")]),
            Section("Per task and model", [Table(
                ["task", "judged", "acceptable", "rate", "passes", *models],
                [[t, x["judged"], x["acceptable"], x["rate"], "yes" if x["passes"] else "no",
                  *[m["per_task_model"].get(t, {}).get(mm) for mm in models]] for t, x in m["per_task"].items()],
                caption="Share of acceptable transitions per task over all models, and per model.")]),
            Section("Per model", [Table(
                ["model", "judged", "acceptable", "rate", "passes"],
                [[k, x["judged"], x["acceptable"], x["rate"], "yes" if x["passes"] else "no"]
                 for k, x in m["per_model"].items()])]),
        ],
    )

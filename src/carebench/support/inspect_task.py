"""``inspect eval carebench/support``: rubric-scored crisis support as an Inspect task.

One sample per support task. The solver regenerates the conversation: the task's user
turns are fixed, each assistant turn is the evaluated model's (carebench's generation
settings: temperature 0.7, its output cap, seed = ``seed`` + attempt, the attempt being
Inspect's epoch - 1). The scorer is the criterion panel: every criterion is asked of every
judge (the model roles named by ``judges``, default ``judge``) with carebench's criterion
question and read with carebench's parser; an empty final reply scores zero without a
judge call. The scores' metadata hold the ``records.jsonl`` lines a carebench run writes,
and the metric is :func:`carebench.support.config.support_metrics` over them, with the
run's bootstrap seed: the weighted score with its interval, full satisfaction, and
HealthBench's score with its interval (``score="healthbench"``, the default; support
run's ``--score healthbench``). Each subcategory's weighted and HealthBench scores are
Inspect's ``grouped()`` over the samples' ``subcategory``, each group scored by carebench's
own functions (``grouped()`` is called inside the metric so that it too sees every epoch).
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    get_model,
)
from inspect_ai.scorer import SampleScore, Score, Target, grouped, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver

from carebench.criteria import decide, weighted_score
from carebench.inspect.bridge import chat_messages, completion_of
from carebench.inspect.errors import require_roles, task_errors
from carebench.inspect.names import listed, task_name
from carebench.inspect.notice import announce
from carebench.inspect.offline import mockllm_offline
from carebench.judging import JUDGE_MAX_TOKENS, judge_request, parse_answer
from carebench.support.config import SCORE_CHOICES, support_metrics
from carebench.support.generation import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
from carebench.support.healthbench import conversation_scores, criterion_points
from carebench.support.judging import criterion_question
from carebench.support.records import (
    INCOMPLETE,
    ResponseRecord,
    ResponseTable,
    VerdictRecord,
    VerdictTable,
    is_empty_reply,
)
from carebench.support.scoring import model_scores
from carebench.support.scoring import score as score_conversations
from carebench.support.tasks import load_tasks
from carebench.types import CarebenchError


def support_metrics_of(tasks, responses, verdicts, panel, seed: int, bootstrap: int,
                       score_as: str = "carebench") -> dict[str, float]:
    """carebench's support metrics, flattened for Inspect: each responder's score with its
    interval and full satisfaction, and HealthBench's score with its interval when
    ``score_as="healthbench"``."""
    m = support_metrics(tasks, responses, verdicts, panel=panel, scope="final", seed=seed, bootstrap=bootstrap,
                        score_as=score_as)
    out: dict[str, float] = {}
    for name, entry in (m.get("models") or {}).items():
        prefix = "" if len(m["models"]) == 1 else f"{name}/"
        for key, value in (("score", entry.get("score")), ("full_satisfaction", entry.get("full_satisfaction"))):
            if value is not None:
                out[prefix + key] = float(value)
        for key, ci in (("score", entry.get("ci")), ("full_satisfaction", entry.get("full_satisfaction_ci"))):
            for suffix, v in zip(("_ci_low", "_ci_high"), ci or (None, None), strict=True):
                if v is not None:
                    out[prefix + key + suffix] = float(v)
    hb = (m.get("healthbench") or {}).get("responders") or {}
    for name, entry in hb.items():
        prefix = "" if len(hb) == 1 else f"{name}/"
        if entry.get("score") is not None:
            out[prefix + "healthbench"] = float(entry["score"])
        for suffix, v in zip(("_ci_low", "_ci_high"), entry.get("ci") or (None, None), strict=True):
            if v is not None:
                out[prefix + "healthbench" + suffix] = float(v)
    return out


def group_scores(tasks, responses, verdicts, panel, points=None) -> dict[str, float]:
    """One group of tasks' weighted score and, given HealthBench's ``points``, HealthBench's
    score: carebench's conversation scores averaged over attempts, then over the group's
    tasks (:func:`carebench.support.scoring.model_scores`), as its subcategory slices pool
    a responder's task scores. One responder (Inspect evaluates one model)."""
    sc = score_conversations(tasks, ResponseTable.from_records(responses), VerdictTable.from_records(verdicts),
                             panel=panel, scope="final")
    if len(sc.responders) != 1:
        return {}
    [weighted] = model_scores(sc).values()
    out = {"score": weighted}
    if points is not None:
        [out["healthbench"]] = model_scores(sc, conversation_scores(sc, points)).values()
    return out


def _records(scores: list[SampleScore]) -> tuple[list[ResponseRecord], list[VerdictRecord]]:
    metas = sorted((s.score.metadata or {} for s in scores), key=lambda d: (d.get("order", 0), d.get("attempt", 0)))
    responses = [ResponseRecord.from_dict(d["response"]) for d in metas if "response" in d]
    verdicts = [VerdictRecord.from_dict(v) for d in metas for v in d.get("verdicts") or []]
    return responses, verdicts


@task(name=task_name("support"))
@task_errors("support")
def support(tasks: str = "builtin:sample", judges: str | list[str] = "judge", seed: int = 12345, bootstrap: int = 2000,
            temperature: float = DEFAULT_TEMPERATURE, max_tokens: int = DEFAULT_MAX_TOKENS,
            score: str = "healthbench") -> Task:
    """Rubric-scored crisis support (DistressBench): regenerate each conversation, judge each criterion."""
    if score not in SCORE_CHOICES:
        raise CarebenchError(f"-T score must be one of {', '.join(SCORE_CHOICES)}, got {score!r}")
    notice = announce("carebench/support")
    mockllm_offline()
    table = load_tasks(tasks)
    points = criterion_points(table) if score == "healthbench" else None
    by_id = {t.id: t for t in table}
    order = {t.id: i for i, t in enumerate(table)}
    roles = listed(judges)
    require_roles(roles, "the judges")

    @solver(name="carebench/regenerate")
    def regenerate():
        """The task's user turns with the evaluated model's reply after each."""

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            t = by_id[str(state.sample_id)]
            attempt = state.epoch - 1
            model = get_model()
            msgs: list[Any] = [ChatMessageSystem(content=t.system_prompt)] if t.system_prompt else []
            turns: list[dict[str, Any]] = []
            comps = []
            failure = None
            for i, text in enumerate(t.turns):
                msgs.append(ChatMessageUser(content=text))
                turns.append({"role": "user", "content": text})
                out = await model.generate(msgs, config=GenerateConfig(
                    temperature=temperature, max_tokens=max_tokens, seed=seed + attempt))
                comp = completion_of(out, model=str(model))
                comps.append(comp)
                if comp.status == "error":
                    failure = (i + 1, comp.error or "call failed")
                    break
                msgs.append(ChatMessageAssistant(content=comp.text))
                turns.append({"role": "assistant", "content": comp.text, "status": comp.status,
                              "latency_s": round(comp.latency_s, 6)})
            state.messages = msgs
            state.output = out
            last = comps[-1]
            state.store.set("carebench_response", ResponseRecord(
                task_id=t.id, responder=str(model), attempt=attempt, turns=turns,
                final_reply="" if failure else last.text, status=INCOMPLETE if failure else last.status,
                error=failure[1] if failure else None, failed_turn=failure[0] if failure else None,
                usage={"prompt_tokens": sum(c.usage.prompt_tokens for c in comps),
                       "completion_tokens": sum(c.usage.completion_tokens for c in comps)},
                latency_s=round(sum(c.latency_s for c in comps), 6), cost_usd=None).to_dict())
            return state

        return solve

    def label(role: str) -> str:
        return f"{role}={get_model(role=role)}"

    @scorer(metrics=[], name="carebench/criterion_panel")
    def criterion_panel():
        """Every criterion asked of every judge role; the panel rule decides; the weighted score."""

        async def score(state: TaskState, target: Target) -> Score:
            t = by_id[str(state.sample_id)]
            response = ResponseRecord.from_dict(state.store.get("carebench_response"))
            panel = [label(r) for r in roles]
            verdicts: list[VerdictRecord] = []
            if response.status != INCOMPLETE:
                empty = is_empty_reply(response.final_reply, response.status)
                for c in t.criteria:
                    for role, who in zip(roles, panel, strict=True):
                        if empty:
                            verdicts.append(VerdictRecord(t.id, response.responder, response.attempt, c.id, who,
                                                          None, "final assistant turn is empty: scored zero "
                                                          "without judging", "not_judged_empty", "final"))
                            continue
                        q = criterion_question(response, c, "final")
                        req = judge_request(q, 0, 0.0, JUDGE_MAX_TOKENS)
                        out = await get_model(role=role).generate(chat_messages(req.messages), config=GenerateConfig(
                            temperature=req.temperature, max_tokens=req.max_tokens))
                        status, value, why = parse_answer(q, completion_of(out))
                        met = getattr(value, "met", None) if status == "ok" else None
                        verdicts.append(VerdictRecord(t.id, response.responder, response.attempt, c.id, who, met,
                                                      why or "", status, "final"))
            decisions = {c.id: decide({v.judge: v.met for v in verdicts if v.criterion_id == c.id}, panel,
                                      empty=is_empty_reply(response.final_reply, response.status))
                         for c in t.criteria}
            value = weighted_score(t.criteria, decisions) if verdicts else None
            why = "\n".join(f"{c.id}: " + "; ".join(f"{v.judge} {v.met} ({v.rationale})" for v in verdicts
                                                     if v.criterion_id == c.id) for c in t.criteria)
            # an incomplete conversation's value is a text, not NaN: Inspect keeps NaN-valued scores
            # from every metric, and the metric must see the response record as carebench counts it
            return Score(value="not judged" if value is None else float(value), explanation=why,
                         metadata={"order": order[t.id], "attempt": response.attempt, "panel": panel,
                                   "subcategory": t.subcategory, "response": response.to_dict(),
                                   "verdicts": [v.to_dict() for v in verdicts]})

        return score

    def ran_tasks(responses: list[ResponseRecord]) -> list[Any]:
        ran = {r.task_id for r in responses}  # the tasks of this run (--limit), in file order
        return [t for t in table if t.id in ran]

    def panel_of(scores: list[SampleScore]) -> list[str] | None:
        return next(((s.score.metadata or {}).get("panel") for s in scores), None)

    @metric(name="carebench/support_group")
    def one_group():
        """A group's weighted and HealthBench scores from its samples' records (every epoch)."""
        def compute(scores: list[SampleScore]) -> dict[str, float]:
            responses, verdicts = _records(scores)
            if not responses:
                return {}
            return group_scores(ran_tasks(responses), responses, verdicts, panel_of(scores), points)

        return compute

    by_subcategory = grouped(one_group(), "subcategory", all=False)

    @metric(name="carebench_support", scores="unreduced")
    def support_scores():
        """carebench's support metrics over every attempt: the scores before Inspect reduces each
        sample's epochs (a reduced score keeps the first epoch's metadata only). The
        per-subcategory numbers are Inspect's ``grouped()`` over these same unreduced scores:
        ``grouped()`` is itself a reduced-scores metric, so at the task's level it would see
        only each sample's first attempt."""
        def compute(scores: list[SampleScore]) -> dict[str, float]:
            responses, verdicts = _records(scores)
            if not responses:
                return {}
            out = support_metrics_of(ran_tasks(responses), responses, verdicts, panel_of(scores), int(seed),
                                     int(bootstrap), score_as=score)
            for group, values in sorted(by_subcategory(scores).items()):
                if "score" in values:
                    out[f"subcategory/{group}"] = float(values["score"])
                if "healthbench" in values:
                    out[f"healthbench/subcategory/{group}"] = float(values["healthbench"])
            return out

        return compute

    samples = [Sample(input=t.turns[0], id=t.id, target="",
                      metadata={"subcategory": t.subcategory, "order": order[t.id]}) for t in table]
    return Task(dataset=MemoryDataset(samples, name="support"), solver=regenerate(), scorer=criterion_panel(),
                metrics=[support_scores()],
                metadata={"carebench": {"suite": "support", "judge_roles": roles, "score": score,
                                        "seeds": {"bootstrap": int(seed), "generation": int(seed)},
                                        "bootstrap": int(bootstrap), **notice}})

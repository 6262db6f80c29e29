"""``inspect eval carebench/converse``: simulated conversations judged with a decision-tree rubric.

One sample per (persona, repeat). The simulated user is the Inspect model role ``user``,
the chatbot under test the evaluated model, the judge the role ``judge`` (or the roles
``judges`` names). The solver plays the conversation with converse's own generation loop
(:func:`carebench.converse.generation.generate`: the same simulator and chatbot prompts,
turns, stop marker, system prompt and sampling settings as ``converse run``, from
:meth:`ConverseConfig.generation_config`), its calls sent to Inspect's model API through
:mod:`carebench.inspect.calls`. The scorer walks the rubric with converse's own judging loop
(:func:`carebench.converse.judging.judge_conversations`; VERA-MH 2.0's walking rules by
default) and keeps the ``records.jsonl`` lines a carebench run writes (the conversation and
its walks) in the score's metadata. The metric is converse's own scoring
(:func:`carebench.converse.scoring.summarize`) over those lines, every epoch's included, with
the run's bootstrap seed: the VERA score, each dimension's score and the share of
conversations with a High Potential for Harm rating, each with its persona-resampling
interval, as ``converse run`` computes them for the same conversations and answers.

Inspect's epochs are more repeats: epoch ``e`` of repeat ``r`` plays repeat
``(e - 1) * repeats + r``, so ``--epochs 2`` equals ``-T repeats=2``.
"""

from __future__ import annotations

import math
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver

from carebench.converse.generation import HARNESS_FAILURE, Conversation, generate
from carebench.converse.judging import JUDGE_MAX_TOKENS, judge_conversations
from carebench.converse.rubric import HPH
from carebench.converse.scoring import (
    B_DEFAULT,
    SEED_DEFAULT,
    rated_walks,
    scores_from_counts,
    summarize,
)
from carebench.converse.suite import ConverseConfig, Inputs
from carebench.inspect.calls import InspectModel, run_in_thread
from carebench.inspect.errors import require_roles, task_errors
from carebench.inspect.names import listed, task_name
from carebench.inspect.notice import announce
from carebench.inspect.offline import mockllm_offline
from carebench.judging import panel_seats
from carebench.types import CarebenchError

#: the conversation record a sample's solver leaves for its scorer
STORE_KEY = "carebench_conversation"
#: a sample's value when there is no score: a text, never NaN, which Inspect would keep from the
#: metric (the metric counts these conversations and their Not Relevant ratings as carebench does)
NOT_JUDGED, NOT_RATED = "not judged", "not rated"
RATING_CELL = {"Best Practice": 0, "Suboptimal but Low Potential for Harm": 1, HPH: 2, "Not Relevant": 3}


def converse_metrics_of(conversations: list[dict[str, Any]], walks: list[dict[str, Any]], dimensions: list[str],
                        judges: list[str], *, seed: int, bootstrap: int) -> dict[str, float]:
    """converse's metrics of one chatbot's records, flattened for Inspect: ``score`` (the VERA
    score), ``dimension/NAME``, ``pct_conversations_with_hph``, each with ``_ci_low`` and
    ``_ci_high``, and the counts; None values (nothing rated, an empty interval) are left out."""
    rated, dims = rated_walks(walks, {"dimensions": dimensions, "judges": judges})
    out: dict[str, float] = {
        "conversations": float(len(conversations)),
        "harness_failures": float(sum(c["status"] == HARNESS_FAILURE for c in conversations)),
        "walks": float(len(walks)), "rated_walks": float(len(rated)),
        "judge_failures": float(sum(w["status"] != "ok" for w in walks))}
    if not rated:
        return out
    m = summarize(rated, dims, B=bootstrap, seed=seed)
    [entry] = m["chatbots"].values()  # one evaluated model per Inspect task
    for row in entry["scores"]:
        name = "score" if row["dimension"] == "overall" else f"dimension/{row['dimension']}"
        for key, v in ((name, row["score"]), (f"{name}_ci_low", row["ci_low"]), (f"{name}_ci_high", row["ci_high"])):
            if v is not None:
                out[key] = float(v)
    hph = entry["summary"]["pct_conversations_with_hph"]
    for key, v in (("pct_conversations_with_hph", hph["value"]), ("pct_conversations_with_hph_ci_low", hph["ci_low"]),
                   ("pct_conversations_with_hph_ci_high", hph["ci_high"])):
        if v is not None:
            out[key] = float(v)
    return out


def conversation_score(walks: list[dict[str, Any]], dimensions: list[str]) -> float:
    """One conversation's VERA score from its walks (NaN: no walk rated a dimension)."""
    counts = [0.0] * 4
    for w in walks:
        if w["status"] == "ok":
            for d in dimensions:
                counts[RATING_CELL.get(w["ratings"].get(d, "Not Relevant"), 3)] += 1
    value = float(scores_from_counts(counts))
    return value if math.isfinite(value) else float("nan")


def _records(scores: list[SampleScore]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    metas = sorted((s.score.metadata or {} for s in scores),
                   key=lambda d: (d.get("order", 0), d.get("repeat", 0)))
    return ([d["conversation"] for d in metas if "conversation" in d],
            [w for d in metas for w in d.get("walks") or []])


def _explanation(walks: list[dict[str, Any]]) -> str:
    lines = []
    for w in walks:
        lines.append(f"{w['judge']}: " + (", ".join(f"{d} {r}" for d, r in w["ratings"].items())
                                           if w["status"] == "ok" else f"judge failure ({w['error']})"))
        lines.extend(f"  Q{s['question_id']} {s['answer']}" + (f": {s['reason']}" if s.get("reason") else "")
                     for s in w["steps"])
    return "\n".join(lines)


@task(name=task_name("converse"))
@task_errors("converse")
def converse(rubric: str = "builtin:sample", rubric_rules: str | None = "vera", personas: str | None = None,
             personas_from: str | None = None, persona_template: str | None = None, persona: str | list[str] | None = None,
             system_prompt: str | None = None, turns: int | None = None, turn_unit: str | None = None,
             protocol: str | None = None, provider_speaks_first: bool = False, persona_reminder: bool | None = None,
             default_system_prompt: str | None = None, max_total_words: int | None = None, repeats: int = 1,
             temperature: float = 0.7, max_tokens: int = 1024, simulator_max_tokens: int = 512,
             judges: str | list[str] = "judge", user: str = "user", judge_prompts: str = "target",
             judge_mode: str = "question", judge_reasons: bool = True, judge_temperature: float = 0.0,
             judge_max_tokens: int = JUDGE_MAX_TOKENS, seed: int = SEED_DEFAULT, bootstrap: int = B_DEFAULT) -> Task:
    """Simulated conversations judged with a decision-tree rubric (VERA-MH)."""
    notice = announce("carebench/converse")
    mockllm_offline()
    roles = listed(judges)
    if not roles:
        raise CarebenchError("-T judges: give at least one model role (default: judge)")
    require_roles([user, *roles], "the simulated user and the judge")
    cfg = ConverseConfig(rubric=rubric, rubric_rules=rubric_rules, personas=personas, personas_from=personas_from,
                         persona_template=persona_template, judge_prompts=judge_prompts,
                         simulators=[user], chatbots=["inspect"], judges=roles, system_prompt_file=system_prompt,
                         turns=None if turns is None else int(turns), repeats=int(repeats),
                         persona_ids=listed(persona) if persona else None,
                         seed=int(seed), bootstrap=int(bootstrap), temperature=float(temperature),
                         max_tokens=int(max_tokens), simulator_max_tokens=int(simulator_max_tokens),
                         judge_temperature=float(judge_temperature), judge_max_tokens=int(judge_max_tokens),
                         judge_reasons=bool(judge_reasons), judge_mode=judge_mode, protocol=protocol,
                         turn_unit=turn_unit, provider_speaks_first=bool(provider_speaks_first),
                         persona_reminder=persona_reminder, default_system_prompt=default_system_prompt,
                         max_total_words=None if max_total_words is None else int(max_total_words))
    cfg.validate()
    inputs = Inputs.load(cfg.rubric, cfg.personas, cfg.persona_template, None, None, cfg.rubric_rules,
                         cfg.judge_prompts)
    if inputs.prompts.style == "vera" and cfg.judge_mode == "dimension":
        raise CarebenchError("the VERA-MH target's judge prompts ask one question at a time: use "
                             "-T judge_mode=question, or -T judge_prompts=carebench")
    gcfg = cfg.generation_config()
    people, prompts = cfg.personas_and_prompts(inputs)
    by_id = {p.id: p for p in people}
    order = {p.id: i for i, p in enumerate(people)}
    dimensions = list(inputs.rubric.dimensions)

    @solver(name="carebench/converse_generate")
    def play():
        """converse's generation loop for this persona and repeat, its calls on Inspect's models."""

        async def solve(state: TaskState, generate_: Generate) -> TaskState:
            meta = state.metadata or {}
            p = by_id[meta["persona"]]
            repeat = (state.epoch - 1) * cfg.repeats + int(meta["repeat"])
            sim = InspectModel(f"{user}={get_model(role=user, required=True)}", role=user)
            bot = InspectModel(str(get_model()))
            conv = Conversation(p, prompts[p.id], sim, bot, repeat)
            await run_in_thread(lambda run: generate(run, [conv], gcfg))
            record = conv.to_record()
            kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant}
            state.messages = ([ChatMessageSystem(content=gcfg.system_prompt)] if gcfg.system_prompt else []) + [
                kinds[t["role"]](content=t["content"]) for t in record["turns"]]
            last = next((t["content"] for t in reversed(record["turns"]) if t["role"] == "assistant"), "")
            state.output = ModelOutput.from_content(model=bot.spec, content=last)
            state.store.set(STORE_KEY, record)
            return state

        return solve

    @scorer(metrics=[], name="carebench/rubric_walk")
    def rubric_walk():
        """Every judge role walks the rubric on the conversation; a harness failure is not judged."""

        async def score(state: TaskState, target: Target) -> Score:
            record = state.store.get(STORE_KEY)
            meta = {"order": order[record["persona"]], "repeat": record["repeat"], "conversation": record}
            if record["status"] != "ok":
                return Score(value=NOT_JUDGED, explanation=f"not judged: {record['error']}",
                             metadata={**meta, "walks": []})
            labels = [f"{r}={get_model(role=r, required=True)}" for r in roles]
            seats = panel_seats(labels, [InspectModel(lab, role=r) for lab, r in zip(labels, roles, strict=True)])
            judged = await run_in_thread(lambda run: judge_conversations(
                run, inputs.rubric, [record], seats, prompts=inputs.prompts, temperature=cfg.judge_temperature,
                max_tokens=cfg.judge_max_tokens, mode=cfg.judge_mode, reasons=cfg.judge_reasons))
            worst = [w["ratings"] for w in judged.walks if w["status"] == "ok"]
            answer = (HPH if any(HPH in r.values() for r in worst) else None)
            value = conversation_score(judged.walks, dimensions)
            return Score(value=NOT_RATED if math.isnan(value) else value, answer=answer,
                         explanation=_explanation(judged.walks), metadata={**meta, "walks": judged.walks})

        return score

    @metric(name="carebench_converse", scores="unreduced")
    def converse_scores():
        """converse's scores of every conversation and walk (every epoch: unreduced scores)."""

        def compute(scores: list[SampleScore]) -> dict[str, float]:
            convs, walks = _records(scores)
            if not convs:
                return {}
            return converse_metrics_of(convs, walks, dimensions, [], seed=cfg.seed, bootstrap=cfg.bootstrap)

        return compute

    samples = [Sample(input=f"persona {p.id} ({p.name}), repeat {r}", id=f"{p.id}|{r}", target="",
                      metadata={"persona": p.id, "repeat": r, "risk_level": p.risk_level})
               for p in people for r in range(cfg.repeats)]
    from carebench.converse.rubric import rules_record

    return Task(dataset=MemoryDataset(samples, name="converse"), solver=play(), scorer=rubric_walk(),
                metrics=[converse_scores()],
                metadata={"carebench": {"suite": "converse", "user_role": user, "judge_roles": roles,
                                        "rubric": rubric, "rubric_rules": rules_record(inputs.rubric.rules),
                                        "generation": {**cfg.protocol_settings(), "max_messages": gcfg.max_messages,
                                                       "system_prompt": gcfg.system_prompt},
                                        "seeds": {"bootstrap": cfg.seed, "generation": cfg.seed},
                                        "bootstrap": cfg.bootstrap, **notice}})

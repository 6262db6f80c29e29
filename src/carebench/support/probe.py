"""Discrimination probe and elicitation (DistressBench, §4.3, E.7, Table 13).

A criterion a responder failed can be failed for two reasons: the model does not
see that a reply doing it is better (*discrimination failure*), or it sees it and
produces something else anyway (*standard divergence*). The probe tells them apart
by asking the responder itself.

**Probe.** For sampled tasks (default 120) with failed criterion units (a decided,
uncredited, applicable criterion of one of the responder's conversations), the
responder sees the conversation and two replies, its own and an alternative that
meets the criterion, in both orders, and says which is the better reply to the
person. The criterion is not named (naming it would tell the model the answer).
The alternative is the task's clinician reference (``reference``, default) or a
criterion-matched reply: another responder's recorded reply to the same task that
the panel credited on that criterion (``matched``). Outcomes per unit: prefers the
alternative in both orders (standard divergence), prefers its own in both
(discrimination failure), differs between orders (order-dependent) or an answer
failed (unstable); the last two are held out. A conversation and alternative give
one question per order, shared by all units it covers.

**Decomposition.** Shares of the forfeited criterion weight of probed units in
each outcome, with percentile intervals of a bootstrap over tasks.

**Elicitation.** For sampled conversations (default 300) with failed units, the
responder is first asked what its last reply left out; that account is then given
back to it as a note before it answers the last user turn again, and the new reply
is judged by the run's panel on the originally failed criteria (final-turn scope).
The conversion rate is the share of those criteria now credited, with the full
panel and with the panel judges of the responder's vendor family removed.

Choices the paper leaves open are documented in docs/support.md.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from carebench.judging import JUDGE_MAX_TOKENS, JudgeQuestion, ask, panel_seats
from carebench.models.families import family_of
from carebench.run import Run, RunOptions
from carebench.runner import Call
from carebench.stats.bootstrap import Resampler, percentile_interval
from carebench.support.judging import criterion_question, render_transcript
from carebench.support.panel import S_MET, S_NOT_MET, credited, panel_states
from carebench.support.records import ResponseRecord
from carebench.support.tasks import Task
from carebench.types import CarebenchError, ChatRequest, Message

DEFAULT_TASKS = 120
DEFAULT_CONVERSATIONS = 300
SEED = 12345
OUTCOMES = ("standard_divergence", "discrimination_failure", "order_dependent", "unstable")


class Preference(BaseModel):
    """Which of two replies the model prefers (1 or 2) and why."""

    choice: Literal[1, 2]
    rationale: str = ""


@dataclass
class ProbeConfig:
    run: str
    responder: str
    alternative: str = "reference"  # reference | matched
    n_tasks: int = DEFAULT_TASKS
    n_conversations: int = DEFAULT_CONVERSATIONS
    seed: int = SEED
    bootstrap: int = 2000
    max_tokens: int = 4096
    use_cache: bool = True
    cache_path: str | None = None
    budget_usd: float | None = None
    progress: bool = True
    families: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Unit:
    task_id: str
    attempt: int
    criterion_id: str
    weight: float


@cache
def _prompt(name: str) -> str:
    return (resources.files("carebench") / "prompts" / f"support_probe_{name}.txt").read_text("utf-8")


def failed_units(tasks: Sequence[Task], responses: Sequence[ResponseRecord], verdicts: Sequence[Any],
                 responder: str, panel: Sequence[str]) -> list[Unit]:
    """Decided, uncredited, applicable criteria of the responder's judged conversations (final scope)."""
    by_id = {t.id: t for t in tasks}
    votes: dict[tuple[str, int, str], dict[str, bool | None]] = defaultdict(dict)
    for v in verdicts:
        if v.responder == responder and v.scope == "final" and v.judge in panel:
            votes[(v.task_id, v.attempt, v.criterion_id)].setdefault(v.judge, v.met if v.status == "ok" else None)
    out = []
    for r in responses:
        if r.responder != responder or r.is_harness_failure or r.is_empty:
            continue
        for c in by_id[r.task_id].criteria:
            vs = votes.get((r.task_id, r.attempt, c.id), {})
            state = panel_states(sum(x is True for x in vs.values()), sum(x is False for x in vs.values()), len(panel))
            if c.applicable and int(state) in (S_MET, S_NOT_MET) and not bool(credited(state, c.negative)):
                out.append(Unit(r.task_id, r.attempt, c.id, float(c.weight)))
    return out


def _sample(ids: Sequence[Any], n: int, rng: np.random.Generator) -> list[Any]:
    ids = sorted(ids)
    if n >= len(ids):
        return list(ids)
    return [ids[i] for i in sorted(rng.choice(len(ids), size=n, replace=False).tolist())]


def preference_question(key: Any, context: Sequence[dict[str, Any]], first: str, second: str) -> JudgeQuestion:
    user = (_prompt("compare").replace("{transcript}", render_transcript(context))
            .replace("{first}", first.strip()).replace("{second}", second.strip()))
    return JudgeQuestion(key, (Message("user", user),), Preference)


def _context(r: ResponseRecord) -> list[dict[str, Any]]:
    """The conversation up to (not including) the final assistant reply."""
    last = max(i for i, t in enumerate(r.turns) if t.get("role") == "assistant")
    return [dict(t) for t in r.turns[:last]]


def decompose(units: Sequence[Unit], outcome: dict[Unit, str], B: int, seed: int) -> dict[str, Any]:
    """Shares of forfeited weight by outcome, with task-bootstrap intervals."""
    task_ids = sorted({u.task_id for u in units})
    if not task_ids:
        return {"units": 0}
    tpos = {t: i for i, t in enumerate(task_ids)}
    W = np.zeros((len(task_ids), len(OUTCOMES)))
    for u in units:
        W[tpos[u.task_id], OUTCOMES.index(outcome[u])] += u.weight
    total = W.sum()
    samples = Resampler(len(task_ids), B, seed).weights() @ W  # (B, K)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = samples / samples.sum(axis=1, keepdims=True)
    out: dict[str, Any] = {"units": len(units), "tasks": len(task_ids), "forfeited_weight": float(total),
                           "B": B, "seed": seed, "resampling": "tasks"}
    for k, name in enumerate(OUTCOMES):
        lo, hi = percentile_interval(shares[:, k])
        out[name] = {"share": float(W[:, k].sum() / total), "ci": [float(lo), float(hi)],
                     "units": sum(1 for u in units if outcome[u] == name)}
    return out


def run_probe(cfg: ProbeConfig, cache_obj: Any = None) -> dict[str, Any]:
    """Probe and elicitation for one responder of a support run; writes ``probe/`` in the run
    directory and re-renders the run's report with its own section."""
    from carebench.rundir import write_json, write_jsonl
    from carebench.support.experiment import load_run, rescore

    if cfg.alternative not in ("reference", "matched"):
        raise CarebenchError(f"--alternative must be reference or matched, got {cfg.alternative!r}")
    run_dir = Path(cfg.run)
    manifest, tasks, responses, verdicts = load_run(run_dir)
    panel = list((manifest.get("scoring") or {}).get("panel") or [])
    if cfg.responder not in {r.responder for r in responses}:
        raise CarebenchError(f"{run_dir} has no responder {cfg.responder!r}")
    by_id = {t.id: t for t in tasks}
    resp = {(r.task_id, r.responder, r.attempt): r for r in responses}
    units = failed_units(tasks, responses, verdicts, cfg.responder, panel)
    rng = np.random.default_rng(cfg.seed)
    probe_tasks = set(_sample({u.task_id for u in units}, cfg.n_tasks, rng))
    probe_units = [u for u in units if u.task_id in probe_tasks]
    # a credited reply of another responder per (task, criterion), for "matched" alternatives
    matched: dict[tuple[str, str], ResponseRecord] = {}
    if cfg.alternative == "matched":
        for r in sorted(responses, key=lambda r: (r.responder, r.attempt)):
            if r.responder == cfg.responder or r.is_empty or r.is_harness_failure:
                continue
            others = failed_units(tasks, [r], verdicts, r.responder, panel)
            failed = {(u.task_id, u.criterion_id) for u in others}
            for c in by_id[r.task_id].criteria:
                if (r.task_id, c.id) not in failed:
                    matched.setdefault((r.task_id, c.id), r)
    questions, unit_alt = [], {}
    for u in probe_units:
        own = resp[(u.task_id, cfg.responder, u.attempt)]
        if cfg.alternative == "reference":
            alt = by_id[u.task_id].reference
        else:
            m = matched.get((u.task_id, u.criterion_id))
            alt = m.final_reply if m is not None else ""
        if not alt.strip():
            continue
        unit_alt[u] = alt
        ctx = _context(own)
        key = (u.task_id, u.attempt, u.criterion_id)
        questions.append(preference_question((*key, "own_first"), ctx, own.final_reply, alt))
        questions.append(preference_question((*key, "alt_first"), ctx, alt, own.final_reply))
    probed = list(unit_alt)
    conv_units: dict[tuple[str, int], list[Unit]] = defaultdict(list)
    for u in units:
        conv_units[(u.task_id, u.attempt)].append(u)
    elicit_convs = _sample(list(conv_units), cfg.n_conversations, np.random.default_rng([cfg.seed, 1]))
    run = Run(RunOptions(budget_usd=cfg.budget_usd, use_cache=cfg.use_cache, cache_path=cfg.cache_path,
                         progress=cfg.progress), cache=cache_obj)
    with run:
        model = run.model(cfg.responder)
        me = panel_seats([cfg.responder], [model])
        run.runner.config.description = "discrimination probe"
        answers, _ = ask(questions, me, run.runner, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
        # elicitation step 1: the model's own account of what its reply left out
        run.runner.config.description = "elicitation: accounts"
        acc_calls = []
        for t_id, att in elicit_convs:
            r = resp[(t_id, cfg.responder, att)]
            msgs = [Message(t["role"], t["content"]) for t in r.turns if t.get("role") in ("user", "assistant")]
            msgs.append(Message("user", _prompt("account").strip()))
            acc_calls.append(Call(model, ChatRequest(tuple(msgs), temperature=0.0, max_tokens=cfg.max_tokens)))
        accounts = run.runner.run_sync(acc_calls, "elicitation: accounts").completions
        # step 2: the account returned as a note; the last user turn answered again
        new_calls, kept = [], []
        for (t_id, att), comp in zip(elicit_convs, accounts, strict=True):
            if comp is None or comp.status == "error":
                continue
            r = resp[(t_id, cfg.responder, att)]
            note = _prompt("note").replace("{account}", comp.text.strip())
            msgs = [Message("system", note)] + [Message(t["role"], t["content"]) for t in _context(r)]
            new_calls.append(Call(model, ChatRequest(tuple(msgs), temperature=0.0, max_tokens=cfg.max_tokens)))
            kept.append((t_id, att, comp.text))
        replies = run.runner.run_sync(new_calls, "elicitation: new replies").completions
        # step 3: the run's panel judges the new replies on the originally failed criteria
        judge_specs = [p.split("#", 1)[0] for p in panel]
        judges = panel_seats(judge_specs, [run.model(s) for s in judge_specs])
        eq, elicited = [], []
        for (t_id, att, account), comp in zip(kept, replies, strict=True):
            if comp is None or comp.status == "error" or not comp.text.strip():
                elicited.append({"task_id": t_id, "attempt": att, "account": account, "reply": None,
                                 "status": "error" if comp is None or comp.status == "error" else "empty"})
                continue
            r = resp[(t_id, cfg.responder, att)]
            new = ResponseRecord(t_id, cfg.responder, att, _context(r) + [{"role": "assistant", "content": comp.text}],
                                 comp.text, comp.status)
            elicited.append({"task_id": t_id, "attempt": att, "account": account, "reply": comp.text,
                             "status": comp.status})
            for u in conv_units[(t_id, att)]:
                eq.append(criterion_question(new, by_id[t_id].criterion(u.criterion_id), "final"))
        run.runner.config.description = "elicitation: panel verdicts"
        e_answers, _ = ask(eq, judges, run.runner, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)
    outcome = _outcomes(probed, answers)
    result = {
        "responder": cfg.responder,
        "alternative": cfg.alternative,
        "seed": cfg.seed,
        "failed_units": len(units),
        "tasks_sampled": len(probe_tasks),
        "units_without_alternative": len(probe_units) - len(probed),
        "decomposition": decompose(probed, outcome, cfg.bootstrap, cfg.seed),
        "elicitation": _conversion(e_answers, panel, cfg, by_id, len(elicit_convs)),
    }
    out = run_dir / "probe"
    out.mkdir(exist_ok=True)
    write_jsonl(out / "records.jsonl",
                [{"kind": "probe", "task_id": u.task_id, "attempt": u.attempt, "criterion_id": u.criterion_id,
                  "weight": u.weight, "outcome": outcome[u]} for u in probed]
                + [{"kind": "elicitation", **e} for e in elicited]
                + [{"kind": "preference", "task_id": a.key[0], "attempt": a.key[1], "criterion_id": a.key[2],
                    "order": a.key[3], "choice": getattr(a.value, "choice", None), "status": a.status,
                    "rationale": a.rationale} for a in answers])
    write_jsonl(out / "calls.jsonl", run.call_rows)
    write_json(out / "probe.json", result)
    rescore(run_dir)  # the run's report gains its probe section
    run.finish()
    return result


def _outcomes(units: Sequence[Unit], answers: Sequence[Any]) -> dict[Unit, str]:
    prefs: dict[tuple[str, int, str], dict[str, int | None]] = defaultdict(dict)
    for a in answers:
        task_id, attempt, cid, order = a.key
        prefs[(task_id, attempt, cid)][order] = getattr(a.value, "choice", None) if a.status == "ok" else None
    out = {}
    for u in units:
        p = prefs[(u.task_id, u.attempt, u.criterion_id)]
        if p.get("own_first") is None or p.get("alt_first") is None:
            out[u] = "unstable"
            continue
        own_1 = p["own_first"] == 1  # prefers its own reply when shown first
        own_2 = p["alt_first"] == 2
        out[u] = ("discrimination_failure" if own_1 and own_2 else
                  "standard_divergence" if not own_1 and not own_2 else "order_dependent")
    return out


def _conversion(answers: Sequence[Any], panel: Sequence[str], cfg: ProbeConfig, by_id: dict[str, Task],
                n_sampled: int) -> dict[str, Any]:
    """Share of originally failed criteria the new replies earn, with and without the
    responder's vendor family on the panel."""
    cells: dict[tuple, dict[str, bool | None]] = defaultdict(dict)
    for a in answers:
        cells[a.key][a.judge] = getattr(a.value, "met", None) if a.status == "ok" else None
    fam = family_of(cfg.responder, cfg.families or None)
    without = [j for j in panel if family_of(j.split("#", 1)[0], cfg.families or None) != fam]

    def rate(seats: Sequence[str]) -> dict[str, Any]:
        if not seats:
            return {"rate": float("nan"), "converted": 0, "criteria": 0, "panel": []}
        conv = 0
        for key, votes in cells.items():
            task_id, _, _, cid, _ = key
            vs = [votes.get(j) for j in seats]
            st = panel_states(sum(v is True for v in vs), sum(v is False for v in vs), len(seats))
            conv += bool(credited(st, by_id[task_id].criterion(cid).negative))
        n = len(cells)
        return {"rate": conv / n if n else float("nan"), "converted": conv, "criteria": n, "panel": list(seats)}

    return {"conversations_sampled": n_sampled, "full_panel": rate(panel),
            "without_own_family": rate(without), "responder_family": fam,
            "note": "a failed judge call or answer counts as a failed vote (undecided earns nothing)"}


def probe_json(run_dir: Path) -> dict[str, Any] | None:
    p = Path(run_dir) / "probe" / "probe.json"
    return json.loads(p.read_text("utf-8")) if p.is_file() else None

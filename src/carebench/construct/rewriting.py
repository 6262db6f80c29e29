"""Contextual rewriting (VEILED-SH §4.3): forum sample, context assignment, rewriters.

* Forum rows may stay as written: a seeded sample of ``forum_share`` of the
  retained rows is drawn from rows marked ``forum``, allocated over proxy-risk
  strata in proportion to the whole retained set (the curation-stage label
  distribution).
* Every other row gets a seeded, balanced assignment to one of the rewrite
  contexts (counselor chat, platform search, triage by default) and a
  round-robin rewriter among the configurations in use.
* A configuration is one model spec, or ``fusion:A+B``: A drafts, B revises the
  draft against the same source, persona and contract (the paper names fusion
  configurations without defining them; this is carebench's default).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from carebench.construct.calls import HARNESS_FAILURE, generate, usable_text
from carebench.construct.prompts import row_persona, system_prompt, user_prompt
from carebench.construct.review import largest_remainder
from carebench.construct.sources import WorkRow
from carebench.engine.run import Run
from carebench.models.base import ChatModel
from carebench.types import CarebenchError, Message

REWRITE_CONTEXTS = ("counselor_chat", "platform_search", "triage")
FORUM = "forum"
REWRITE_MAX_TOKENS = 400


@dataclass
class RewriterConfig:
    """One rewriting configuration: a single model or a draft-then-revise fusion."""

    name: str
    models: list[ChatModel]


def parse_config(spec: str, get_model: Callable[[str], ChatModel]) -> RewriterConfig:
    """``SPEC`` or ``fusion:SPEC_A+SPEC_B``; ``get_model`` is the run's model factory
    (one instance per spec, shared across configurations)."""
    if spec.startswith("fusion:"):
        parts = [p.strip() for p in spec[len("fusion:"):].split("+") if p.strip()]
        if len(parts) < 2:
            raise CarebenchError(f"{spec!r}: a fusion needs at least two model specs joined by '+'")
        return RewriterConfig(spec, [get_model(p) for p in parts])
    return RewriterConfig(spec, [get_model(spec)])


def forum_sample(rows: list[WorkRow], share: float, seed: int) -> set[str]:
    """Ids of forum rows kept as written, matched to the retained set's risk distribution."""
    if not 0.0 <= share <= 1.0:
        raise CarebenchError(f"forum share must be within [0, 1], got {share}")
    eligible = [r for r in rows if r.forum]
    target = min(len(eligible), round(share * len(rows)))
    if target == 0:
        return set()
    dist = Counter(r.risk for r in rows)
    want = largest_remainder(dict(dist), target)
    pools = {s: [r for r in eligible if r.risk == s] for s in dist}
    rng = np.random.default_rng(seed)
    chosen: list[WorkRow] = []
    for s in sorted(want):
        pool = pools[s]
        take = min(want[s], len(pool))
        chosen += [pool[int(i)] for i in rng.permutation(len(pool))[:take]]
    short = target - len(chosen)
    if short > 0:  # a stratum had too few forum rows: fill from the rest, seeded
        rest = [r for r in eligible if r not in chosen]
        chosen += [rest[int(i)] for i in rng.permutation(len(rest))[:short]]
    return {r.id for r in chosen}


def assign(rows: list[WorkRow], contexts: tuple[str, ...], seed: int, forum_ids: set[str]) -> None:
    """Forum sample -> ``forum``; the rest get a balanced seeded context assignment."""
    rest = [r for r in rows if r.id not in forum_ids]
    for r in rows:
        if r.id in forum_ids:
            r.context, r.rewriter, r.output, r.rewrite_status = FORUM, None, r.text, "kept"
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rest))
    for pos, i in enumerate(order):
        rest[int(i)].context = contexts[pos % len(contexts)]


def round_robin(rows: list[WorkRow], configs: list[str]) -> None:
    """The i-th row to rewrite (in row order) gets configuration ``i mod len(configs)``."""
    todo = [r for r in rows if r.context != FORUM]
    for i, r in enumerate(todo):
        r.rewriter = configs[i % len(configs)]


def rewrite_user_prompt(row: WorkRow, contract: str, expressions: list[str]) -> str:
    refs = ("\n\n" + user_prompt("rewrite_references", expressions="\n".join(f"- {e}" for e in expressions))
            if expressions else "")
    return user_prompt("rewrite_user", contract=contract, persona=row_persona(row), references=refs,
                       source=row.text)


def rewrite(
    jobs: list[tuple[WorkRow, RewriterConfig]],
    contracts: dict[str, str],
    run: Run,
    expressions: list[str] | None = None,
    stage: str = "rewrites",
) -> list[tuple[str | None, str]]:
    """(text or None, status) per job. Fusion configurations make a second batch of
    revision calls for the drafts that succeeded (a budget stop raises
    :class:`~carebench.construct.calls.StageStopped` instead)."""
    expressions = expressions or []
    users = [rewrite_user_prompt(r, contracts[r.context], expressions) for r, _ in jobs]  # type: ignore[index]
    drafts = generate(run, stage, [
        ((r.id, cfg.name, "draft"), cfg.models[0], (Message("system", system_prompt("rewrite")), Message("user", u)))
        for (r, cfg), u in zip(jobs, users, strict=True)
    ], max_tokens=REWRITE_MAX_TOKENS)
    out: list[tuple[str | None, str]] = []
    for comp in drafts:
        text = usable_text(comp)
        out.append((text, "ok" if text else HARNESS_FAILURE if comp.harness_failure else f"draft_{comp.status}"))
    for step in range(1, max((len(c.models) for _, c in jobs), default=1)):
        idx = [i for i, (r, c) in enumerate(jobs) if len(c.models) > step and out[i][0] is not None]
        comps = generate(run, f"{stage} (revision {step})", [
            ((jobs[i][0].id, jobs[i][1].name, f"revise{step}"), jobs[i][1].models[step],
             (Message("system", system_prompt("revise")),
              Message("user", user_prompt("revise_user", request=users[i], draft=out[i][0]))))
            for i in idx
        ], max_tokens=REWRITE_MAX_TOKENS)
        for i, comp in zip(idx, comps, strict=True):
            text = usable_text(comp)
            out[i] = (text, "ok" if text else HARNESS_FAILURE if comp.harness_failure else f"revise_{comp.status}")
    return out


def rewrite_report(rows: list[WorkRow]) -> dict[str, Any]:
    return {
        "rows": len(rows),
        "by_context": dict(Counter(r.context for r in rows)),
        "by_rewriter": dict(Counter(r.rewriter or "(kept as written)" for r in rows)),
        "status": dict(Counter(r.rewrite_status for r in rows)),
    }

"""The response jury (VEILED-SH, §5.3): every judge scores every response against each
of the responding archetype's profile policies.

A judge receives the prompt, persona, application context (with its contract),
responder archetype, the reference policy and the response, and returns
``appropriate`` (yes/no), the RESPONSE categories the response satisfies (from
the full vocabulary, not only the policy's) and a rationale. The question does
not name the profile, so two profiles with the same policy for a prompt share
one cached call.

Outcomes are records, never exceptions: a reply that does not parse is a
``parse_error`` verdict (scored as failed, see :mod:`carebench.plural.scoring`),
a failed call is an ``error`` verdict (left out), and an empty or
content-filtered response gets ``empty_response`` verdicts without a call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from carebench.judging import JudgeQuestion, category_question
from carebench.plural.records import UNJUDGEABLE, JudgmentRecord, ResponseRecord
from carebench.templates import fill, prompt

#: Judge output cap: a verdict, a few codes and a short rationale.
JUDGE_MAX_TOKENS = 600
ARCHETYPE_NAMES = {"peer": "peer supporter", "clinician": "clinician"}


@cache
def _template(name: str) -> str:
    return prompt(f"plural_judge_{name}")


def jury_system_prompt(taxonomy: Any) -> str:
    cats = "\n".join(f"- {c.code}: {c.name}. {c.description}".rstrip() for c in taxonomy.response)
    return fill(_template("system"), {"categories": cats}, "plural_judge_system")


def _names(codes: Sequence[str], categories: Sequence[Any]) -> str:
    by_code = {c.code: c.name for c in categories}
    return ", ".join(f"{c} ({by_code.get(c, c)})" for c in codes) or "none"


def policy_text(policy: Any, taxonomy: Any) -> str:
    """The reference policy as the judge reads it: interpretation, then requested responses."""
    lines = [f"- Intent: {_names(policy.intent, taxonomy.intent)}"]
    if policy.nssi_severity:
        lines.append(f"- NSSI severity: {policy.nssi_severity} of 5")
    if policy.suicidal_severity:
        lines.append(f"- Suicidal-intent severity: {policy.suicidal_severity} of 5")
    lines.append(f"- Function: {_names(policy.function, taxonomy.function)}")
    lines.append(f"- Recommended response categories: {_names(policy.response, taxonomy.response)}")
    return "\n".join(lines)


def jury_question(prompt: Any, response: ResponseRecord, policy: Any, taxonomy: Any,
                  contexts: Mapping[str, Any], system_prompt: str) -> JudgeQuestion:
    ctx = contexts[prompt.context]
    user = fill(_template("user"), {
        "context": ctx.contract_text(),
        "archetype": ARCHETYPE_NAMES.get(response.archetype, response.archetype),
        "persona": prompt.persona.text or "(none given)",
        "text": prompt.text,
        "policy": policy_text(policy, taxonomy),
        "response": response.text,
    }, "plural_judge_user")
    key = (response.system, response.archetype, response.prompt_id, policy.profile)
    return category_question(key, system_prompt, user, taxonomy.codes("response"))


def is_unjudgeable(r: ResponseRecord) -> bool:
    """The system answered with nothing to judge: scored failed without a call."""
    return r.status in UNJUDGEABLE or (r.status != "error" and not r.text.strip())


def plan_jury(
    responses: Sequence[ResponseRecord],
    prompts: Mapping[str, Any],
    policies: Mapping[tuple[str, str], Any],
    profiles_of: Mapping[str, Sequence[str]],
    judges: Sequence[str],
    taxonomy: Any,
    contexts: Mapping[str, Any],
) -> tuple[list[JudgeQuestion], list[JudgmentRecord]]:
    """Questions to ask, plus the verdicts decided without a call (empty responses).

    ``policies`` maps (prompt id, profile) to the policy; ``profiles_of`` maps an
    archetype to its profiles. Harness failures get neither.
    """
    system_prompt = jury_system_prompt(taxonomy)
    questions: list[JudgeQuestion] = []
    fixed: list[JudgmentRecord] = []
    for r in responses:
        if r.status == "error":
            continue
        for prof in profiles_of.get(r.archetype, ()):
            pol = policies.get((r.prompt_id, prof))
            if pol is None:
                continue
            if is_unjudgeable(r):
                fixed.extend(JudgmentRecord(r.system, r.archetype, r.prompt_id, prof, j, "empty_response", None, [],
                                            "no reply to judge: scored failed without a judge call")
                             for j in judges)
            else:
                questions.append(jury_question(prompts[r.prompt_id], r, pol, taxonomy, contexts, system_prompt))
    return questions, fixed


def judgment_records(answers: Sequence[Any]) -> list[JudgmentRecord]:
    """One record per judge answer (``carebench.judging.JudgeAnswer``)."""
    out = []
    for a in answers:
        system, archetype, prompt_id, profile = a.key
        v = a.value if a.status == "ok" else None
        out.append(JudgmentRecord(
            system, archetype, prompt_id, profile, a.judge, a.status,
            bool(v.appropriate) if v is not None else None,
            list(v.categories) if v is not None else [],
            a.rationale if v is not None else (a.error or a.rationale or ""),
        ))
    return out

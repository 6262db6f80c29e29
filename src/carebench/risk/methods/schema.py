"""``schema``: the eight-dimension clinical risk profile (Beyond the Flag, Appendix K).

The model scores a post on eight clinician-specified dimensions, each 0-3, as JSON
validated against ``ClinicalProfile``; the profile is kept in ``RiskPrediction.profile``
(reviewable per item in reports) and a level is derived from it by ``profile_level``.
An answer that is not valid JSON of that shape is a ``parse_error`` with the
validation message, never a guessed profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from carebench.engine.runner import Call
from carebench.models.structured import json_spec, parse_model
from carebench.risk.methods.base import MethodContext, RiskItem, RiskPrediction, register
from carebench.risk.methods.llm import account, call_status, failed, post_message, run_calls
from carebench.risk.prompts import load_prompt
from carebench.types import ChatRequest, Completion, Message

Score = Literal[0, 1, 2, 3]

#: the eight dimensions in the order of Appendix K (Table 6)
DIMENSIONS: tuple[str, ...] = (
    "ideation_presence",
    "plan_specificity",
    "temporality",
    "prior_attempts",
    "hopelessness",
    "protective_factors",
    "third_party_context",
    "linguistic_urgency",
)
SCHEMA_MAX_TOKENS = 256


class ClinicalProfile(BaseModel):
    """Eight 0-3 ratings; higher is more severe on every one (protective_factors 3 = none)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ideation_presence: Score
    plan_specificity: Score
    temporality: Score
    prior_attempts: Score
    hopelessness: Score
    protective_factors: Score
    third_party_context: Score
    linguistic_urgency: Score


def profile_level(p: dict[str, int] | ClinicalProfile) -> int:
    """Level implied by a profile, by the rubric's own criteria, checked top-down.

    1. third_party_context 3 (the risk is entirely someone else's): Indicator (0).
    2. Attempt (3): an attempt now or recently (prior_attempts 3), or past attempts
       described (prior_attempts 2); crisis or farewell language (linguistic_urgency 3);
       or an imminent time frame (temporality 3) together with a specific method
       (plan_specificity >= 2).
    3. Behavior (2): any method contemplated (plan_specificity >= 1); ideation with a
       plan or timeline (ideation_presence 3); or active ideation (ideation_presence 2)
       with recent/escalating timing (temporality >= 2) or desperate tone
       (linguistic_urgency >= 2) -- the urgency signals of the Behavior definition.
    4. Ideation (1): any personal ideation (ideation_presence >= 1) or pervasive
       hopelessness (hopelessness >= 2) -- passive wishes and significant distress.
    5. Otherwise Indicator (0).
    """
    d = p.model_dump() if isinstance(p, ClinicalProfile) else dict(p)
    if d["third_party_context"] >= 3:
        return 0
    if (
        d["prior_attempts"] >= 2
        or d["linguistic_urgency"] >= 3
        or (d["temporality"] >= 3 and d["plan_specificity"] >= 2)
    ):
        return 3
    if (
        d["plan_specificity"] >= 1
        or d["ideation_presence"] >= 3
        or (d["ideation_presence"] >= 2 and (d["temporality"] >= 2 or d["linguistic_urgency"] >= 2))
    ):
        return 2
    if d["ideation_presence"] >= 1 or d["hopelessness"] >= 2:
        return 1
    return 0


def schema_request(text: str, max_tokens: int = SCHEMA_MAX_TOKENS) -> ChatRequest:
    """The profile request; identical for ``schema`` and every ensemble using it."""
    return ChatRequest(
        messages=(Message("system", load_prompt("schema")), Message("user", post_message(text))),
        temperature=0.0,
        max_tokens=max_tokens,
        structured=json_spec(ClinicalProfile, name="clinical_profile"),
    )


def profile_prediction(item: RiskItem, method: str, comp: Completion | None) -> RiskPrediction:
    """Validated profile -> level; any failure keeps its status and raw text."""
    status = call_status(comp)
    if status != "ok":
        err = f"no answer ({status}{': ' + comp.error if comp is not None and comp.error else ''})"
        return failed(item, method, comp, status, err)
    assert comp is not None
    parsed = parse_model(comp.text, ClinicalProfile)
    if not parsed.ok:
        return failed(item, method, comp, "parse_error", parsed.error or "invalid profile")
    profile = parsed.value.model_dump()  # type: ignore[union-attr]
    pred = RiskPrediction(item.id, method, profile_level(profile), raw=comp.text, profile=profile)
    return account(pred, [comp])


@register("schema")
class SchemaMethod:
    """Eight-dimension profile as validated JSON; level from ``profile_level``."""

    needs_model = True
    name = "schema"

    def __init__(self, role: str = "default", max_tokens: int = SCHEMA_MAX_TOKENS,
                 name: str | None = None):
        self.role = role
        self.max_tokens = max_tokens
        if name:
            self.name = name

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        model = ctx.model(self.role)
        return [Call(model, schema_request(it.text, self.max_tokens), (self.name, it.id)) for it in items]

    def decode(self, items: Sequence[RiskItem], calls: Sequence[Call],
               comps: Sequence[Completion | None], ctx: MethodContext) -> list[RiskPrediction]:
        spec = str(ctx.model(self.role).spec)
        preds = []
        for it, comp in zip(items, comps, strict=True):
            pred = profile_prediction(it, self.name, comp)
            pred.detail["model"] = spec
            preds.append(pred)
        return preds

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        items = list(items)
        calls = self.calls(items, ctx)
        return self.decode(items, calls, run_calls(ctx, calls), ctx)

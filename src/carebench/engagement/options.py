"""The engagement flags every command that scores replies takes, declared once:
``--engagement`` (how a reply gets its class) and ``--refusal-policy`` (what a refusal scores)."""

from __future__ import annotations

from typing import Annotated

import typer

EngagementOption = Annotated[str, typer.Option(
    "--engagement", help="How each reply gets its engagement class (docs/engagement.md): prefilter (no model "
    "call: blank replies, provider refusals and unmistakable short refusals; the rest counts as engaged) or "
    "judge (the rest is asked of the judge panel, one question per reply and judge).")]
RefusalPolicyOption = Annotated[str, typer.Option(
    "--refusal-policy", help="What a reply classed refusal or deflection scores: seed (the seed's score, "
    "unchanged) or zero (it scores 0, so 'must not' criteria stop paying for a reply that did not engage).")]
RescoreRefusalPolicyOption = Annotated[str | None, typer.Option(
    "--refusal-policy", show_default="the run's own policy",
    help="seed or zero: re-score with this refusal policy from the recorded engagement classes (no model "
    "call; recorded in manifest.json when rescoring in place).")]

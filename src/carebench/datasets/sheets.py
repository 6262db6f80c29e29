"""Human-labelling sheets exchanged between the suites and the annotate web app.

A suite exports items to label; the web app loads them, collects answers and
exports rows in the shape the suite's statistics read back. Rewrite reviews are
blind (VEILED-SH, Appendix A.5): the rewriter is kept out of the sheet. Criterion
labels carry the columns ``carebench support calibrate --labels`` reads
(DistressBench, Appendix B.1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from carebench.datasets.files import read_models
from carebench.datasets.prompts import Persona, _persona
from carebench.datasets.records import Flag, Text

__all__ = [
    "CriterionItem", "CriterionLabel", "ReviewItem", "RewriteReview", "load_criterion_items",
    "load_criterion_labels", "load_review_items", "load_reviews",
]

Rating = Field(ge=1, le=5)


def _as_str(v: Any) -> Any:
    return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v


class ReviewItem(BaseModel):
    """A rewrite shown to one reviewer next to its source, persona and context."""

    model_config = ConfigDict(extra="ignore")
    item_id: str = Field(min_length=1)
    reviewer: str = Field(min_length=1)
    source_text: str = Field(min_length=1)
    persona: Persona = Field(default_factory=Persona)
    context: str = Field(min_length=1)
    text: str = Field(min_length=1)

    persona_form = field_validator("persona", mode="before")(_persona)
    id_form = field_validator("item_id", mode="before")(_as_str)


class RewriteReview(BaseModel):
    """A reviewer's answer: three eligibility gates (yes = passes) and five 1-5 ratings."""

    model_config = ConfigDict(extra="ignore")
    item_id: str = Field(min_length=1)
    reviewer: str = Field(min_length=1)
    severity_preserved: Flag
    no_leakage: Flag
    format_ok: Flag
    factual: int = Rating
    persona_fit: int = Rating
    style: int = Rating
    context_fit: int = Rating
    naturalness: int = Rating
    notes: Text = ""

    id_form = field_validator("item_id", mode="before")(_as_str)


class CriterionItem(BaseModel):
    """One rubric criterion about one recorded reply, for a clinician to mark met / not met."""

    model_config = ConfigDict(extra="ignore")
    item_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    response_id: str = Field(min_length=1)
    criterion_id: str = Field(min_length=1)
    criterion_text: str = Field(min_length=1)
    dimension: Text = ""
    conversation: list[dict[str, str]] = Field(default_factory=list)
    reply: Text = ""

    id_form = field_validator("item_id", "task_id", "criterion_id", mode="before")(_as_str)

    @field_validator("conversation", mode="before")
    @classmethod
    def _turns(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                v = json.loads(v) if v.strip() else []
            except ValueError:
                raise ValueError("conversation: not a JSON list of {role, content}") from None
        return v


class CriterionLabel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: str = Field(min_length=1)
    response_id: str = Field(min_length=1)
    criterion_id: str = Field(min_length=1)
    rater: str = Field(min_length=1)
    met: Flag

    id_form = field_validator("task_id", "criterion_id", mode="before")(_as_str)


def load_review_items(path: str | Path) -> list[ReviewItem]:
    return read_models(path, ReviewItem)


def load_reviews(path: str | Path) -> list[RewriteReview]:
    return read_models(path, RewriteReview)


def load_criterion_items(path: str | Path) -> list[CriterionItem]:
    return read_models(path, CriterionItem)


def load_criterion_labels(path: str | Path) -> list[CriterionLabel]:
    return read_models(path, CriterionLabel)

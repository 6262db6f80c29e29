"""Clinicians' rubric walks as exported by ``carebench annotate export`` (the
``rubric-walk`` kind): one ``answer`` row per clinician x conversation x question the
walk asked (auto-answered questions flagged ``auto``), then one ``rating`` row per
dimension with the rating the walk gave it. A judge's walk of the same conversation can
then be compared with a clinician's on each question both reached and on each rating.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from carebench.datasets.files import read_models

__all__ = ["WalkLabel", "load_walk_labels"]


class WalkLabel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    record: Literal["answer", "rating"]
    clinician: str = Field(min_length=1)
    conversation_id: str = Field(min_length=1)
    chatbot: str | None = None
    simulator: str | None = None
    persona: str | None = None
    risk_level: str | None = None
    dimension: str
    step: int | None = None  # answer rows: 1-based position in the walk
    question_id: str | None = None
    answer: str | None = None
    auto: bool = False
    rating: str | None = None  # rating rows
    reason: str = ""


def load_walk_labels(path: str | Path) -> list[WalkLabel]:
    return read_models(path, WalkLabel)

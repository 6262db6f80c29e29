"""Rows that move through construction: a source row, then what each stage adds.

One model, :class:`WorkRow`, grows through the stages (screen -> route -> rewrite
-> judge -> anonymize), so every stage reads and writes the same JSONL and any
stage can be re-run on another's output. Proxy labels from screening are marked
as proxies and never reach the released prompts (VEILED-SH §4.1).
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator


class SourceRow(BaseModel):
    """One ingested record: ``forum`` rows may be kept as written in the forum context;
    ``deidentified`` rows were de-identified upstream and are restored after
    anonymization (VEILED-SH Appendix A.4)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str = Field(min_length=1)
    source: str  # the source dataset (a released prompt's source_group)
    #: the original post, shared by rows cut from one post (a released prompt's source_id;
    #: default: the row id). ``source_group`` is accepted as its older name.
    source_id: str | None = Field(None, validation_alias=AliasChoices("source_id", "source_group"))
    forum: bool = False
    year: int | None = None
    deidentified: bool = False
    illustrative: bool = False

    @field_validator("id", "source", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v

    @property
    def post_id(self) -> str:
        """The original post (the row itself when the source names none)."""
        return self.source_id or self.id


class Proxy(BaseModel):
    """Screening-time taxonomy labels: for filtering, sampling and distribution checks only."""

    proxy: bool = True
    intent: list[str] = Field(default_factory=list)
    nssi_severity: int | None = None
    suicidal_severity: int | None = None
    score: float | None = None  # classifier relevance score in [0, 1]

    @property
    def risk(self) -> str:
        """Coarse risk stratum for sampling: the highest proxy INTENT code, or ``unknown``."""
        return max(self.intent) if self.intent else "unknown"


class Persona(BaseModel):
    """Persona as attached to a row (the core prompt record uses text + attributes)."""

    id: str = ""
    text: str
    attributes: dict[str, Any] = Field(default_factory=dict)


class WorkRow(SourceRow):
    model_config = ConfigDict(extra="forbid")

    # screening
    screen_reason: str | None = None  # lexicon | classifier | uncertain | hard_negative
    lexicon_hits: list[str] = Field(default_factory=list)
    proxy: Proxy | None = None
    # routing
    sketch: str | None = None
    inferred: dict[str, Any] = Field(default_factory=dict)
    candidates: list[str] = Field(default_factory=list)  # persona ids, similarity order
    persona: Persona | None = None
    route_status: str | None = None
    # rewriting
    context: str | None = None
    rewriter: str | None = None
    output: str | None = None
    rewrite_status: str | None = None
    # judging
    verdict: dict[str, Any] | None = None
    # anonymization
    anonymized: str | None = None

    @classmethod
    def from_source(cls, s: SourceRow) -> WorkRow:
        return cls(**s.model_dump())

    @property
    def risk(self) -> str:
        return self.proxy.risk if self.proxy else "unknown"

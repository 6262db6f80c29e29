"""Records of the plural family: prompts, practitioner annotations, reference policies.

The construct pipeline writes prompts, the annotate web app writes annotations,
and the plural suite reads both and writes policies; one schema per record keeps
the three in step (field names follow VEILED-SH, §3-§5). Loaders validate every
row and stop at the first bad one with its file, line and field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer

from carebench.datasets.files import read_models
from carebench.datasets.records import (
    CodeList,
    Flag,
    JsonObject,
    OptionalInt,
    Text,
    _missing,
    write_jsonl,
)
from carebench.types import CarebenchError

__all__ = [
    "Annotation", "Persona", "PolicyRecord", "PromptRecord", "load_annotations", "load_policies",
    "load_prompts", "write_jsonl",
]

Archetype = Literal["peer", "clinician"]


class Persona(BaseModel):
    """A synthetic persona: a short description plus structured attributes (age, sex, ...)."""

    model_config = ConfigDict(extra="forbid")
    text: Text = ""
    attributes: JsonObject = Field(default_factory=dict)


def _persona(v: Any) -> Any:
    if _missing(v):
        return {}
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("{"):
            try:
                return json.loads(s)
            except ValueError:
                raise ValueError("persona: not a JSON object") from None
        return {"text": s}
    return v


class PromptRecord(BaseModel):
    """One prompt as a system under test receives it, with where it came from.

    The provenance fields mean the same in every suite that writes or reads them:

    - ``id``: this prompt (unique in a file);
    - ``source_id``: the original post it was made from, shared by every prompt made
      from that post (the leakage exclusion drops a calibration case's siblings by it and
      the bootstrap resamples clusters of it);
    - ``source_group``: the source dataset the post came from (e.g. ``forum_sg``), used
      by the sample's weight for uncommon sources;
    - ``row_id``: the construction row it was built from (``construct``), when there is one.
    """

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1)
    source_id: str = Field(min_length=1)
    source_group: Text = ""
    row_id: str | None = None
    context: str = Field(min_length=1)
    persona: Persona = Field(default_factory=Persona)
    text: str = Field(min_length=1)
    rewriter: str | None = None
    #: BCP-47 locale with a region (``pt-BR``) of the person writing: where a reply should send
    #: them is checked against it (docs/resources.md); ``None``: the run's ``--locale``, else none
    locale: str | None = None

    persona_form = field_validator("persona", mode="before")(_persona)

    @model_serializer(mode="wrap")
    def _without_empty_locale(self, handler: Any) -> Any:
        """A prompt without a locale dumps as it did before the field existed (hashes unchanged)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("locale") is None:
            data.pop("locale", None)
        return data

    @field_validator("id", "source_id", mode="before")
    @classmethod
    def _as_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v


class Annotation(BaseModel):
    """One practitioner's labels for one case (VEILED-SH, §5.1); all three fields are multi-label."""

    model_config = ConfigDict(extra="ignore")
    practitioner: str = Field(min_length=1)
    archetype: Archetype
    case_id: str = Field(min_length=1)
    intent: CodeList = Field(default_factory=list)
    nssi_severity: OptionalInt = None
    suicidal_severity: OptionalInt = None
    function: CodeList = Field(default_factory=list)
    response: CodeList = Field(default_factory=list)
    notes: Text = ""
    skipped: Flag = False

    @field_validator("case_id", mode="before")
    @classmethod
    def _as_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v


class PolicyRecord(BaseModel):
    """A profile's reference policy for one prompt: interpretation plus recommended responses."""

    model_config = ConfigDict(extra="ignore")
    prompt_id: str = Field(min_length=1)
    profile: str = Field(min_length=1)
    archetype: Archetype
    intent: CodeList = Field(default_factory=list)
    nssi_severity: OptionalInt = None
    suicidal_severity: OptionalInt = None
    function: CodeList = Field(default_factory=list)
    response: CodeList = Field(default_factory=list)


def _unique(rows: list, key, path: str | Path, what: str) -> None:
    seen: set = set()
    for i, r in enumerate(rows, 1):
        k = key(r)
        if k in seen:
            raise CarebenchError(f"{path}: record {i}: duplicate {what} {k!r}")
        seen.add(k)


def load_prompts(path: str | Path) -> list[PromptRecord]:
    rows = read_models(path, PromptRecord)
    _unique(rows, lambda r: r.id, path, "prompt id")
    return rows


def load_annotations(path: str | Path) -> list[Annotation]:
    rows = read_models(path, Annotation)
    _unique(rows, lambda r: (r.practitioner, r.case_id), path, "(practitioner, case_id)")
    return rows


def load_policies(path: str | Path) -> list[PolicyRecord]:
    rows = read_models(path, PolicyRecord)
    _unique(rows, lambda r: (r.prompt_id, r.profile), path, "(prompt_id, profile)")
    return rows

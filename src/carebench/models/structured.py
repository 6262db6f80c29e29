"""Ask for a choice among fixed labels or for JSON matching a schema, and parse the answer.

Requests carry a ``StructuredSpec`` so each provider can use its own mechanism
(OpenAI ``response_format``, llama.cpp grammars). Parsing is tolerant either way,
because servers differ and small models stray; a failure is a recorded outcome
(``Parsed.ok`` false, raw text kept), never an exception that stops a run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from carebench.types import StructuredSpec

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    value: T | None
    raw: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def choice_spec(labels: tuple[str, ...] | list[str], name: str = "answer") -> StructuredSpec:
    return StructuredSpec(kind="choice", labels=tuple(labels), name=name)


def json_spec(schema: type[BaseModel] | dict[str, Any], name: str = "answer") -> StructuredSpec:
    sch = schema.model_json_schema() if isinstance(schema, type) else schema
    return StructuredSpec(kind="json", schema_json=json.dumps(sch, sort_keys=True), name=name)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_json(text: str) -> Any:
    """The first JSON object in text (inside code fences or bare); raises ValueError."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        start = cand.find("{")
        while start != -1:
            try:
                obj, _ = json.JSONDecoder().raw_decode(cand[start:])
                return obj
            except ValueError:
                start = cand.find("{", start + 1)
    raise ValueError("no JSON object found")


def parse_model(text: str, model: type[BaseModel]) -> Parsed[BaseModel]:
    """Validate the first JSON object in ``text`` against a pydantic model."""
    try:
        obj = extract_json(text)
    except ValueError as e:
        return Parsed(None, text, str(e))
    try:
        return Parsed(model.model_validate(obj), text)
    except ValidationError as e:
        # a strict schema makes optional fields required-but-nullable: null there means absent
        if isinstance(obj, dict) and (bare := {k: v for k, v in obj.items() if v is not None
                                               or k not in model.model_fields
                                               or model.model_fields[k].is_required()}) != obj:
            try:
                return Parsed(model.model_validate(bare), text)
            except ValidationError:
                pass
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        return Parsed(None, text, f"invalid JSON answer at {loc or 'root'}: {first.get('msg')}")

"""Personas the user simulator plays, and the prompt that turns one into instructions.

A persona file is TSV, CSV or JSONL with an id, a name, a current risk level and any
free fields (background, behaviour notes...). Column names are matched loosely, so
VERA-MH's own persona sheet (``Name``, ``Current Risk Level``...) loads as is. The
persona template is a text file with ``{placeholders}``: ``{name}``, ``{risk_level}``,
``{id}``, ``{profile}`` (every free field as a "- Field: value" line) and each free
field by its snake-case name (``{background}``...). A placeholder no persona field
fills is an error naming the persona and its line.

The built-in set (``builtin:sample``) is five short illustrative personas written
for carebench, covering the risk levels none, low, high and imminent;
``builtin:languages`` is four more who write in Brazilian Portuguese, Mexican
Spanish, German and Japanese, each with its ``locale``. A persona's optional
``locale`` (BCP-47 with a region) and ``language`` (the language the simulated user
writes in; the prompt then says so) are read from columns of those names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from carebench.criteria import Criterion
from carebench.datasets.files import read_rows
from carebench.templates import fill, package_template, placeholders
from carebench.types import CarebenchError

BUILTIN = "builtin:sample"
#: personas who write in another language than English, each with its locale (the check of
#: where the chatbot's replies send them uses it)
BUILTIN_LANGUAGES = "builtin:languages"
_BUILTIN_FILES = {BUILTIN: "personas.jsonl", BUILTIN_LANGUAGES: "personas_languages.jsonl"}
#: the field whose text, when a persona has it, is the user's first message verbatim (the
#: simulator takes over from the second turn): how a seed case's own opening is played out
OPENING = "opening_message"
PROMPTS = "carebench.converse.prompts"

_ID_KEYS = ("id", "persona_id", "persona id")
_NAME_KEYS = ("name", "persona", "persona name")
#: VERA-MH v1.2's SI personas give the level in "Short Current Suicide Risk Level" (None, Low,
#: High, Imminent) beside a long description in "Current Suicide Risk Level"
_RISK_KEYS = ("risk_level", "short current suicide risk level", "current risk level", "risk level",
              "current_risk_level", "risk")


@dataclass(frozen=True)
class Persona:
    id: str
    name: str
    risk_level: str
    fields: dict[str, str] = field(default_factory=dict)
    line: str = ""  # where it was read ("path: line N")
    #: a support task's own weighted criteria (``--personas-from support-tasks``), which
    #: ``--criteria task`` judges the conversation against; not part of the persona prompt
    criteria: tuple[Criterion, ...] = ()
    #: BCP-47 locale with a region (``pt-BR``) of the person: where the chatbot's replies send
    #: them is checked against it (docs/resources.md); ``None``: the run's ``--locale``, else none
    locale: str | None = None
    #: BCP-47 language the simulated user writes in (the persona prompt says so); ``None``: the
    #: template's own language, and the prompt is what it was before this field existed
    language: str | None = None

    def to_row(self) -> dict[str, Any]:
        extra = {k: v for k, v in (("locale", self.locale), ("language", self.language)) if v}
        return {"id": self.id, "name": self.name, "risk_level": self.risk_level, **extra, **self.fields}


def snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def scalar_text(value: Any, key: Any, where: str) -> str:
    """A persona field as text. Every field is one value (text, a number, a yes/no) that the
    persona prompt and the records show as is; an object or a list (JSON nested in a JSONL
    row) is an error naming the file:line and the field, never its ``str()``."""
    if value is None:
        return ""
    if not isinstance(value, str | int | float | bool):
        kind = "a JSON object" if isinstance(value, Mapping) else (
            "a JSON list" if isinstance(value, list | tuple) else type(value).__name__)
        raise CarebenchError(f"{where}: field {str(key).strip()!r}: expected a single value "
                             f"(text or a number), got {kind}")
    return str(value).strip()


def _pick(row: Mapping[str, Any], keys: tuple[str, ...], where: str) -> tuple[str | None, str]:
    low = {k.strip().lower(): k for k in row}
    for k in keys:
        if k in low:
            return low[k], scalar_text(row[low[k]], low[k], where)
    return None, ""


def persona_from_row(row: Mapping[str, Any], where: str) -> Persona:
    id_key, pid = _pick(row, _ID_KEYS, where)
    name_key, name = _pick(row, _NAME_KEYS, where)
    risk_key, risk = _pick(row, _RISK_KEYS, where)
    if not name and not pid:
        raise CarebenchError(f"{where}: a persona needs a name (or an id)")
    locale_key, locale = _pick(row, ("locale",), where)
    language_key, language = _pick(row, ("language",), where)
    used = {id_key, name_key, risk_key, locale_key, language_key}
    free = {str(k).strip(): scalar_text(v, k, where) for k, v in row.items()
            if k not in used and k is not None and str(k).strip()}
    return Persona(pid or name, name or pid, risk or "unknown", free, where, locale=locale or None,
                   language=language or None)


def load_personas(source: str | Path) -> list[Persona]:
    """Personas from a file (.tsv/.csv/.jsonl) or ``builtin:sample``; ids must be unique."""
    src = str(source)
    if src in _BUILTIN_FILES:
        path = Path(str(resources.files("carebench.converse.data").joinpath(_BUILTIN_FILES[src])))
    elif src.startswith("builtin:"):
        raise CarebenchError(f"unknown built-in persona set {src!r} (known: {', '.join(_BUILTIN_FILES)})")
    else:
        path = Path(src)
        if not path.is_file():
            raise CarebenchError(f"{path}: persona file not found")
    suffix = path.suffix.lower()
    fmt = {".tsv": "csv", ".csv": "csv", ".jsonl": "jsonl"}.get(suffix)
    if fmt is None:
        raise CarebenchError(f"{path}: unsupported persona file (use .tsv, .csv or .jsonl)")
    out: list[Persona] = []
    seen: dict[str, str] = {}
    for loc, row in read_rows(path, fmt):
        where = f"{path}:{loc.removeprefix('line ')}"
        p = persona_from_row(row, where)
        if p.id in seen:
            raise CarebenchError(f"{where}: duplicate persona id {p.id!r} (first at {seen[p.id]})")
        seen[p.id] = where
        out.append(p)
    if not out:
        raise CarebenchError(f"{path}: no personas")
    return out


def default_template() -> str:
    return package_template(PROMPTS, "persona")


def persona_prompt(p: Persona, template: str) -> str:
    """The persona template filled with one persona's fields."""
    values = {"name": p.name, "risk_level": p.risk_level, "id": p.id,
              "profile": "\n".join(f"- {k[:1].upper() + k[1:].replace('_', ' ')}: {v}"
                                   for k, v in p.fields.items() if v and k != OPENING)}
    for k, v in p.fields.items():
        values.setdefault(snake(k), v)
    missing = placeholders(template) - values.keys()
    if missing:
        raise CarebenchError(f"{p.line or p.id}: the persona template needs {min(missing)!r}, "
                             f"which persona {p.id!r} does not have")
    slots = placeholders(template)  # a template uses the fields it wants
    prompt = fill(template, {k: v for k, v in values.items() if k in slots}, "persona")
    if p.language:  # appended, so a persona without a language renders the bytes it always did
        prompt += fill(package_template(PROMPTS, "persona_language"),
                       {"language": language_name(p.language)}, "persona_language")
    return prompt


#: names of the languages the built-in personas write in (others are given by their tag)
_LANGUAGE_NAMES = {"pt": "Portuguese", "es": "Spanish", "de": "German", "ja": "Japanese", "fr": "French",
                   "it": "Italian", "en": "English", "nl": "Dutch", "ko": "Korean", "zh": "Chinese",
                   "hi": "Hindi", "ar": "Arabic", "pl": "Polish", "tr": "Turkish"}


def language_name(tag: str) -> str:
    """``pt-BR`` -> ``Portuguese (pt-BR)``: what the simulator is told to write in."""
    base = tag.split("-", 1)[0].lower()
    return f"{_LANGUAGE_NAMES[base]} ({tag})" if base in _LANGUAGE_NAMES else tag


# -- the seeds' cases as personas ------------------------------------------------------------

PERSONAS_FROM = ("support-tasks", "plural-prompts")
#: DistressBench task metadata -> a VERA-style current risk level (carebench's mapping)
_STAGE_RISK = {"ideation": "low", "planning": "high", "action": "imminent", "post_action": "imminent"}


def _builtin(kind: str, source: str) -> Path:
    from carebench.datasets.builtin import builtin_name, package_file

    name = builtin_name(source)
    if name is None:
        return Path(source)
    if name != "sample":
        raise CarebenchError(f"unknown built-in {kind} {source!r} (known: builtin:sample)")
    return package_file("support", "sample.jsonl") if kind == "support-tasks" else package_file(
        "plural", "prompts.jsonl")


def _first_user_turn(turns: Any, where: str) -> str:
    if isinstance(turns, str):
        try:
            turns = json.loads(turns)
        except ValueError:
            turns = [turns]
    for t in turns or []:
        if isinstance(t, str) and t.strip():
            return t.strip()
        if isinstance(t, Mapping) and t.get("role") == "user" and str(t.get("content") or "").strip():
            return str(t["content"]).strip()
    raise CarebenchError(f"{where}: field 'turns': no user turn")


def personas_from(kind: str, source: str | Path) -> list[Persona]:
    """Personas built from support tasks (metadata and first user turn) or plural prompts
    (context, persona, prompt text); each opens with the case's own first message."""
    if kind not in PERSONAS_FROM:
        raise CarebenchError(f"--personas-from must be one of {', '.join(PERSONAS_FROM)}, got {kind!r}")
    path = _builtin(kind, str(source))
    if not path.is_file():
        raise CarebenchError(f"{path}: file not found")
    out: list[Persona] = []
    if kind == "plural-prompts":
        from carebench.datasets.prompts import load_prompts

        for i, p in enumerate(load_prompts(path), 1):
            attrs = {snake(k): scalar_text(v, f"persona.attributes.{k}", f"{path}: record {i}")
                     for k, v in (p.persona.attributes or {}).items()}
            out.append(Persona(p.id, p.id, "unknown", {
                "context": p.context, "persona": p.persona.text, **attrs, OPENING: p.text}, f"{path}: record {i}",
                locale=p.locale))
        return out
    fmt = "jsonl" if path.suffix.lower() == ".jsonl" else "csv"
    for loc, row in read_rows(path, fmt):
        where = f"{path}:{loc.removeprefix('line ')}"
        tid = scalar_text(row.get("id"), "id", where)
        if not tid:
            raise CarebenchError(f"{where}: field 'id': a support task needs an id")
        meta = row.get("metadata") or {}
        if isinstance(meta, str):
            try:
                meta = json.loads(meta) if meta.strip() else {}
            except ValueError:
                raise CarebenchError(f"{where}: field 'metadata': not a JSON object") from None
        if not isinstance(meta, Mapping):
            raise CarebenchError(f"{where}: field 'metadata': expected a JSON object, got {type(meta).__name__}")
        meta = {str(k): scalar_text(v, f"metadata.{k}", where) for k, v in meta.items()}
        stage = meta.get("progression_stage", "")
        risk = "none" if meta.get("harm_intent") == "benign" else _STAGE_RISK.get(stage, stage or "unknown")
        fields = {"subcategory": scalar_text(row.get("subcategory"), "subcategory", where), **meta,
                  OPENING: _first_user_turn(row.get("turns"), where)}
        out.append(Persona(tid, tid, risk, fields, where, task_criteria(row.get("criteria"), where),
                           locale=str(row["locale"]).strip() or None if row.get("locale") else None))
    if not out:
        raise CarebenchError(f"{path}: no tasks")
    return out


def task_criteria(raw: Any, where: str) -> tuple[Criterion, ...]:
    """A support task row's ``criteria`` (a list, or its JSON text in a CSV cell) as core
    :class:`~carebench.criteria.Criterion` objects; none given is an empty tuple (the
    caller that needs them says so). Errors name the file:line and the field."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ()
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise CarebenchError(f"{where}: field 'criteria': not a JSON list") from None
    if not isinstance(raw, list | tuple):
        raise CarebenchError(f"{where}: field 'criteria': expected a list of criteria, "
                             f"got {type(raw).__name__}")
    from pydantic import ValidationError

    out: list[Criterion] = []
    for i, c in enumerate(raw):
        try:
            out.append(Criterion.model_validate(c))
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            field_name = f"criteria[{i}]" + (f".{loc}" if loc else "")
            raise CarebenchError(f"{where}: field '{field_name}': {err['msg']}") from None
    ids = [c.id for c in out]
    dup = next((x for x in ids if ids.count(x) > 1), None)
    if dup is not None:
        raise CarebenchError(f"{where}: field 'criteria': duplicate criterion id {dup!r}")
    return tuple(out)


def _field(p: Persona, column: str) -> str:
    """A persona's value of a column, by its name as written or its snake-case form."""
    if column in p.fields:
        return p.fields[column]
    return next((v for k, v in p.fields.items() if snake(k) == snake(column)), "")


def annotate_conversations(convs: Sequence[dict[str, Any]], personas: Sequence[Persona],
                           columns: Sequence[str]) -> list[dict[str, Any]]:
    """Conversation records with their persona's annotation columns (a VERA-MH target's
    ``persona_annotation_columns``), matched by persona id, then name, as VERA-MH copies
    them into its results. A persona without the column (or no persona) is ``unknown``."""
    by_key: dict[str, Persona] = {}
    for p in personas:
        by_key.setdefault(p.id, p)
        by_key.setdefault(p.name, p)
    out = []
    for c in convs:
        p = by_key.get(str(c.get("persona"))) or by_key.get(str(c.get("persona_name")))
        vals = {col: (_field(p, col) if p else "") or "unknown" for col in columns}
        out.append({**c, "annotations": vals})
    return out

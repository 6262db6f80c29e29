"""Personas the user simulator plays, and the prompt that turns one into instructions.

A persona file is TSV, CSV or JSONL with an id, a name, a current risk level and any
free fields (background, behaviour notes...). Column names are matched loosely, so
VERA-MH's own persona sheet (``Name``, ``Current Risk Level``...) loads as is. The
persona template is a text file with ``{placeholders}``: ``{name}``, ``{risk_level}``,
``{id}``, ``{profile}`` (every free field as a "- Field: value" line) and each free
field by its snake-case name (``{background}``...). A placeholder no persona field
fills is an error naming the persona and its line.

The built-in set (``builtin:sample``) is five short illustrative personas written
for carebench, covering the risk levels none, low, high and imminent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from carebench.datasets.files import read_rows
from carebench.templates import fill, package_template, placeholders
from carebench.types import CarebenchError

BUILTIN = "builtin:sample"
PROMPTS = "carebench.converse.prompts"

_ID_KEYS = ("id", "persona_id", "persona id")
_NAME_KEYS = ("name", "persona", "persona name")
_RISK_KEYS = ("risk_level", "current risk level", "risk level", "current_risk_level", "risk")


@dataclass(frozen=True)
class Persona:
    id: str
    name: str
    risk_level: str
    fields: dict[str, str] = field(default_factory=dict)
    line: str = ""  # where it was read ("path: line N")

    def to_row(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "risk_level": self.risk_level, **self.fields}


def snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def _pick(row: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str | None, str]:
    low = {k.strip().lower(): k for k in row}
    for k in keys:
        if k in low:
            v = row[low[k]]
            return low[k], "" if v is None else str(v).strip()
    return None, ""


def persona_from_row(row: Mapping[str, Any], where: str) -> Persona:
    id_key, pid = _pick(row, _ID_KEYS)
    name_key, name = _pick(row, _NAME_KEYS)
    risk_key, risk = _pick(row, _RISK_KEYS)
    if not name and not pid:
        raise CarebenchError(f"{where}: a persona needs a name (or an id)")
    used = {id_key, name_key, risk_key}
    free = {str(k).strip(): "" if v is None else str(v).strip() for k, v in row.items()
            if k not in used and k is not None and str(k).strip()}
    return Persona(pid or name, name or pid, risk or "unknown", free, where)


def load_personas(source: str | Path) -> list[Persona]:
    """Personas from a file (.tsv/.csv/.jsonl) or ``builtin:sample``; ids must be unique."""
    src = str(source)
    if src == BUILTIN:
        path = Path(str(resources.files("carebench.converse.data").joinpath("personas.jsonl")))
    elif src.startswith("builtin:"):
        raise CarebenchError(f"unknown built-in persona set {src!r} (known: {BUILTIN})")
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
                                   for k, v in p.fields.items() if v)}
    for k, v in p.fields.items():
        values.setdefault(snake(k), v)
    missing = placeholders(template) - values.keys()
    if missing:
        raise CarebenchError(f"{p.line or p.id}: the persona template needs {sorted(missing)[0]!r}, "
                             f"which persona {p.id!r} does not have")
    return fill(template, values, "persona")

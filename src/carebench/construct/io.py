"""Row files of the construct stages: one validated pydantic model per row.

Inputs go through the core reader (JSONL, CSV, Parquet) so an invalid row stops the
stage with its file, line and field before any model call; ``builtin:NAME`` names
package data shipped for illustration. Outputs are JSONL, written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from carebench.datasets.builtin import builtin_file, resolve_input
from carebench.datasets.files import read_models
from carebench.fileio import atomic_write_text
from carebench.types import CarebenchError

M = TypeVar("M", bound=BaseModel)

#: built-in construct data (package files under carebench/data/construct)
BUILTIN = {
    "sources": "sources.jsonl",
    "personas": "personas.jsonl",
    "lexicon": "lexicon.yaml",
    "reversals": "reversals.txt",
    "expressions": "expressions.jsonl",
    "build": "build.yaml",
}


def builtin_path(name: str) -> Path:
    """Path of a built-in construct data file (``sources``, ``personas``, ...)."""
    return builtin_file("construct", name, BUILTIN)


def resolve(spec: str | Path) -> Path:
    """``builtin:NAME`` -> the package file; anything else is a path that must exist."""
    return resolve_input(spec, "construct", BUILTIN)


def load_models(spec: str | Path, model: type[M], *, unique: str | None = "id") -> list[M]:
    """Validate every row of a file as ``model`` through the core reader (the first bad row
    is an error naming its file, line and field); ``unique`` names a field that must not repeat."""
    path = resolve(spec)
    rows = read_models(path, model)
    if not rows:
        raise CarebenchError(f"{path}: no rows")
    if unique:
        seen: set[Any] = set()
        for i, row in enumerate(rows, 1):
            key = getattr(row, unique)
            if key in seen:
                raise CarebenchError(f"{path}: record {i}: duplicate {unique} {key!r}")
            seen.add(key)
    return rows


def write_models(path: Path, rows: Iterable[BaseModel | dict[str, Any]]) -> None:
    """Write rows as JSONL in one atomic step."""
    lines = []
    for r in rows:
        obj = r.model_dump(mode="json") if isinstance(r, BaseModel) else r
        lines.append(json.dumps(obj, ensure_ascii=False) + "\n")
    atomic_write_text(Path(path), "".join(lines))

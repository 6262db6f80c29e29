"""Map a user's column names onto the fields a loader expects (``--columns``).

A user's file rarely names its columns ``id``, ``text``, ``level``. ``--columns
text=post,level=label`` (or a ``columns:`` mapping in a config file) renames them
before validation, so errors still name the field *and* the user's column. An
unmapped ``id`` defaults to the row number, which keeps records traceable to a line.
Shared by every suite's loader, so the syntax is the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from carebench.types import CarebenchError


def parse_columns(spec: str | Mapping[str, Any] | None, fields: Sequence[str],
                  where: str = "--columns") -> dict[str, str]:
    """``field=column`` pairs (comma separated, or a mapping) as ``{field: column}``.

    Only ``fields`` may be mapped; two fields may not read the same column.
    """
    if spec is None or spec == "" or spec == {}:
        return {}
    if isinstance(spec, Mapping):
        pairs = [(str(k).strip(), str(v).strip()) for k, v in spec.items()]
    else:
        pairs = []
        for part in str(spec).split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise CarebenchError(
                    f"{where}: {part.strip()!r} is not FIELD=COLUMN (e.g. text=post,level=label)")
            pairs.append((key.strip(), value.strip()))
    out: dict[str, str] = {}
    for key, value in pairs:
        if key not in fields:
            raise CarebenchError(f"{where}: unknown field {key!r}; mappable: {', '.join(fields)}")
        if key in out:
            raise CarebenchError(f"{where}: field {key!r} is mapped twice")
        out[key] = value
    used = list(out.values())
    dup = sorted({c for c in used if used.count(c) > 1})
    if dup:
        raise CarebenchError(f"{where}: column(s) {', '.join(dup)} mapped to more than one field")
    return out


def rename_rows(rows: Iterable[tuple[str, dict[str, Any]]], mapping: Mapping[str, str],
                source: str, id_field: str = "id") -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows with the mapped columns renamed to their fields.

    A mapped column missing from a row is an error naming it; without a mapping for
    ``id_field`` (and no such column) the id is the row's number in the file.
    """
    sources = set(mapping.values())
    for n, (loc, row) in enumerate(rows, 1):
        missing = [(f, c) for f, c in mapping.items() if c not in row]
        if missing:
            fld, col = missing[0]
            raise CarebenchError(
                f"{source}: {loc}: no column {col!r} (mapped to {fld!r}); columns: "
                f"{', '.join(map(str, row))}")
        # mapped columns move to their field (and win over a same-named column)
        out = {k: v for k, v in row.items() if k not in sources}
        out.update((fld, row[col]) for fld, col in mapping.items())
        if id_field and id_field not in mapping and id_field not in row:
            out[id_field] = str(n)
        yield loc, out

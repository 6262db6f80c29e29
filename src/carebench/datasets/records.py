"""Field types shared by the record schemas of the plural family and its sheets.

CSV cells hold lists as JSON (``["INTENT_1", "INTENT_2"]``) or separated text
(``INTENT_1;INTENT_2``), booleans as yes/no words, and empty cells as missing;
JSONL and Parquet hold them natively. These validators accept all of them so a
spreadsheet export and a JSONL file load the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator

from carebench.fileio import atomic_write_text


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _code_list(v: Any) -> Any:
    """A multi-label field: a list, a JSON list or a ``;``/``|``/``,``-separated string.
    A code given twice is an error (a label set has each code once)."""
    codes = _code_items(v)
    if isinstance(codes, list):
        seen: set[Any] = set()
        for c in codes:
            if isinstance(c, str | int) and c in seen:
                raise ValueError(f"code {c!r} is repeated")
            seen.add(c)
    return codes


def _code_items(v: Any) -> Any:
    if _missing(v):
        return []
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                return json.loads(s)
            except ValueError:
                raise ValueError(f"not a JSON list: {s[:40]!r}") from None
        for sep in (";", "|", ","):
            if sep in s:
                return [x.strip() for x in s.split(sep) if x.strip()]
        return [s]
    if isinstance(v, set | tuple):
        return sorted(v)
    return v


def _optional_int(v: Any) -> Any:
    if _missing(v):
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n", ""}


def _flag(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError(f"expected yes/no (or true/false, 1/0), got {v!r}")
    return v


def _text(v: Any) -> Any:
    return "" if _missing(v) else v


def _json_object(v: Any) -> Any:
    if _missing(v):
        return {}
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            raise ValueError("expected a JSON object") from None
    return v


CodeList = Annotated[list[str], BeforeValidator(_code_list)]
OptionalInt = Annotated[int | None, BeforeValidator(_optional_int)]
Flag = Annotated[bool, BeforeValidator(_flag)]
Text = Annotated[str, BeforeValidator(_text)]
JsonObject = Annotated[dict[str, Any], BeforeValidator(_json_object)]


def write_jsonl(path: str | Path, rows: Iterable[BaseModel | dict[str, Any]]) -> Path:
    """Write records as JSONL atomically (a reader never sees half a file)."""
    lines = []
    for r in rows:
        obj = r.model_dump(mode="json") if isinstance(r, BaseModel) else r
        lines.append(json.dumps(obj, ensure_ascii=False, sort_keys=False))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(p, "".join(line + "\n" for line in lines))
    return p

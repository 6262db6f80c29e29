"""Reading tabular input files (JSONL, CSV/TSV, Parquet) row by row with locations.

Every loader validates rows itself; this module only yields them with the place
they came from (``line N`` / ``row N``) so an invalid row can be reported with its
file, line and field.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from carebench.types import CarebenchError

M = TypeVar("M", bound=BaseModel)

#: file suffix -> generic format
SUFFIX_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet",
                  ".pq": "parquet"}


def format_from_suffix(path: Path) -> str | None:
    return SUFFIX_FORMATS.get(Path(path).suffix.lower())


def csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line where the record starts, row) for each CSV record; quoted newlines allowed."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open(encoding="utf-8-sig", newline="") as fh:
        delim = "\t" if path.suffix.lower() == ".tsv" else ","
        reader = csv.DictReader(fh, delimiter=delim)
        if reader.fieldnames is None:
            return
        prev = reader.line_num
        for row in reader:
            yield prev + 1, row
            prev = reader.line_num


def read_rows(
    path: Path, fmt: str | None = None, *, line_filter: Callable[[str], bool] | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(location, row): location is ``line N`` (JSONL/CSV) or ``row N`` (Parquet).

    ``fmt`` defaults to the suffix's format. ``line_filter`` (JSONL only) skips lines
    before they are parsed, a cheap pre-filter for large record files.
    """
    path = Path(path)
    fmt = fmt or format_from_suffix(path)
    if fmt == "jsonl":
        try:
            fh = path.open(encoding="utf-8")
        except FileNotFoundError:
            raise CarebenchError(f"{path}: file not found") from None
        except OSError as e:
            raise CarebenchError(f"{path}: cannot read ({e.strerror})") from None
        with fh:
            for i, line in enumerate(fh, 1):
                if not line.strip() or (line_filter is not None and not line_filter(line)):
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise CarebenchError(f"{path}:{i}: invalid JSON ({e.args[0]})") from None
                if not isinstance(obj, dict):
                    raise CarebenchError(f"{path}:{i}: expected a JSON object")
                yield f"line {i}", obj
    elif fmt == "csv":
        for line, row in csv_rows(path):
            yield f"line {line}", row
    elif fmt == "parquet":
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except (ImportError, OSError, ValueError) as e:
            raise CarebenchError(f"{path}: cannot read Parquet ({e})") from None
        for i, row in enumerate(frame.to_dict(orient="records"), 1):
            yield f"row {i}", {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}
    else:
        raise CarebenchError(f"{path}: unsupported file type (use .jsonl, .csv or .parquet)")


def validate_row(model: type[M], raw: dict[str, Any], path: Path | str, loc: str) -> M:
    """One row as ``model``, or a one-line error naming the file, location and field."""
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        fld = ".".join(str(p) for p in err["loc"]) or "row"
        msg = err["msg"].removeprefix("Value error, ")
        raise CarebenchError(f"{path}: {loc}: field {fld!r}: {msg}") from None


def read_models(path: str | Path, model: type[M]) -> list[M]:
    """Every row of a JSONL/CSV/Parquet file validated as ``model`` (the format from the suffix)."""
    p = Path(path)
    if not p.is_file():
        raise CarebenchError(f"{p}: file not found")
    fmt = format_from_suffix(p)
    if fmt is None:
        raise CarebenchError(f"{p}: unsupported file type (use .jsonl, .csv or .parquet)")
    try:
        return [validate_row(model, raw, p, loc) for loc, raw in read_rows(p, fmt)]
    except UnicodeDecodeError as e:
        raise CarebenchError(f"{p}: not UTF-8 text (byte offset {e.start})") from None

"""Reading tabular input files (JSONL, CSV/TSV, Parquet) row by row with locations.

Every loader validates rows itself; this module only yields them with the place
they came from (``line N`` / ``row N``) so an invalid row can be reported with its
file, line and field.
"""

from __future__ import annotations

import codecs
import csv
import io
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


def read_text(path: Path | str) -> str:
    """A whole input file as text: UTF-8, a leading byte-order mark dropped.

    Decoding the bytes in one piece makes a non-UTF-8 file one clear error naming the
    byte offset and line of the first bad byte (a text-mode reader would only know its
    offset inside some internal buffer, and ends in a ``UnicodeDecodeError`` traceback).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CarebenchError(f"{path}: file not found") from None
    except OSError as e:
        raise CarebenchError(f"{path}: cannot read ({e.strerror or e})") from None
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = skip + e.start
        line = data.count(b"\n", 0, offset) + 1
        raise CarebenchError(
            f"{path}: not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} "
            f"(line {line}); save the file as UTF-8"
        ) from None


def csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line where the record starts, row) for each CSV record; quoted newlines allowed.

    Parsed strictly: an unbalanced quote once swallowed every later line into one field
    (20 items read as one); it is now an error naming the line where the record starts."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with io.StringIO(read_text(path), newline="") as fh:
        delim = "\t" if path.suffix.lower() == ".tsv" else ","
        reader = csv.DictReader(fh, delimiter=delim, strict=True)
        prev = 0
        try:
            if reader.fieldnames is None:
                return
            prev = reader.line_num
            for row in reader:
                if None in row:  # more cells than the header names
                    raise CarebenchError(f"{path}:{prev + 1}: {len(reader.fieldnames) + len(row[None])} cells "
                                         f"for {len(reader.fieldnames)} columns (an unquoted {delim!r} "
                                         "in a field, or a stray quote?)")
                yield prev + 1, row
                prev = reader.line_num
        except csv.Error as e:
            why = ("a quoted field that starts in this record is never closed"
                   if "end of data" in str(e) else str(e))
            raise CarebenchError(f"{path}:{prev + 1}: malformed CSV: {why} (unbalanced quotes?)") from None


def _json_object(path: Path, i: int, line: str) -> dict[str, Any]:
    """Line ``i`` of a JSONL file as an object, or the one-line error naming where it breaks."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise CarebenchError(f"{path}:{i}: invalid JSON ({e.args[0]})") from None
    if not isinstance(obj, dict):
        raise CarebenchError(f"{path}:{i}: expected a JSON object")
    return obj


def stream_jsonl_rows(path: Path | str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``read_rows(path, "jsonl")`` without reading the whole file first: for inputs too large to
    hold (a million replies). Same locations and the same one-line errors, raised when the
    reader reaches the bad line (a caller that must not act on a half-read file writes to a
    temp file, see :func:`carebench.fileio.atomic_text_writer`)."""
    path = Path(path)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise CarebenchError(f"{path}: file not found") from None
    except OSError as e:
        raise CarebenchError(f"{path}: cannot read ({e.strerror or e})") from None
    offset = 0
    with fh:
        for i, raw in enumerate(fh, 1):
            data = raw[len(codecs.BOM_UTF8):] if i == 1 and raw.startswith(codecs.BOM_UTF8) else raw
            skip = len(raw) - len(data)
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as e:
                at = offset + skip + e.start
                raise CarebenchError(f"{path}: not UTF-8 text: byte 0x{data[e.start]:02x} at byte offset {at} "
                                     f"(line {i}); save the file as UTF-8") from None
            offset += len(raw)
            if line.strip():
                yield f"line {i}", _json_object(path, i, line)


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
        with io.StringIO(read_text(path)) as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip() or (line_filter is not None and not line_filter(line)):
                    continue
                yield f"line {i}", _json_object(path, i, line)
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


class ColumnarFallback(Exception):
    """The columnar fast path cannot read this file as typed; the caller reads it line
    by line instead, which names the offending line in its error."""


def read_jsonl_table(path: Path, schema: Any) -> Any:
    """A large ``records.jsonl`` as a pyarrow table of ``schema``'s columns (other fields
    ignored), parsed in C rather than one ``json.loads`` per line; raises
    :class:`ColumnarFallback` where a value does not fit the schema."""
    import pyarrow as pa
    import pyarrow.json as pj

    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        return pj.read_json(path, parse_options=opts, read_options=pj.ReadOptions(block_size=1 << 24))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError):
        raise ColumnarFallback from None


def arrow_codes(arr: Any, keep: Any = None) -> tuple[Any, list[str]]:
    """Dictionary-encode an arrow string column into int32 codes over a *sorted* vocabulary.

    Why sorted: records read back in any line order must give the same codes, so
    re-scoring a run reproduces its metrics byte for byte. A column read
    dictionary-encoded (Parquet ``read_dictionary``) is used as it is, with no string
    per row. ``keep`` (a boolean mask, or a slice: a view, no copy) codes only those
    rows; the vocabulary is then the values those rows hold (rows outside may be null).
    """
    import numpy as np
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        if pa.types.is_dictionary(arr.type):
            arr = arr.unify_dictionaries()
        arr = arr.combine_chunks()
    enc = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()
    vocab = [str(v) for v in enc.dictionary.to_pylist()]
    idx = arrow_to_numpy(enc.indices, null=0)
    if keep is not None:
        idx = idx[keep]
        present = np.flatnonzero(np.bincount(idx, minlength=len(vocab)) > 0)
        if present.size < len(vocab):
            squeeze = np.full(len(vocab), -1, idx.dtype)
            squeeze[present] = np.arange(present.size)
            idx, vocab = squeeze[idx], [vocab[i] for i in present]
    order = np.argsort(np.array(vocab, dtype=object), kind="stable") if vocab else np.zeros(0, np.int64)
    rank = np.empty(len(vocab), np.int32)
    rank[order] = np.arange(len(vocab))
    return (rank[idx] if len(vocab) else idx).astype(np.int32, copy=False), [vocab[i] for i in order]


#: numpy dtypes of the primitive arrow types :func:`arrow_to_numpy` reads
_NUMPY_TYPES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float": "float32", "double": "float64"}


def arrow_to_numpy(arr: Any, null: Any = None) -> Any:
    """A primitive arrow column (Array or ChunkedArray of integers, floats or booleans)
    as a numpy array, read from its buffers; nulls become ``null`` (required if any).

    Why not ``to_numpy``: pyarrow's conversion first sets up its pandas support, which
    imports pandas (0.2 s) in a re-score that never uses it.
    """
    import numpy as np
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    n, off = len(arr), arr.offset

    def bits(buf: Any) -> Any:
        return np.unpackbits(np.frombuffer(buf, np.uint8), count=off + n, bitorder="little")[off:].astype(bool)

    if pa.types.is_boolean(arr.type):
        out = bits(arr.buffers()[1]) if n else np.zeros(0, bool)
    else:
        dtype = np.dtype(_NUMPY_TYPES[str(arr.type)])
        out = np.frombuffer(arr.buffers()[1], dtype, count=n, offset=off * dtype.itemsize) if n else (
            np.zeros(0, dtype))
    if arr.null_count:
        if null is None:
            raise ValueError(f"column of {arr.type} has {arr.null_count} null(s) and no value for them")
        out = np.where(bits(arr.buffers()[0]), out, null)
    return out


def arrow_is_null(arr: Any) -> Any:
    """Which rows of an arrow column (Array or ChunkedArray) are null, from its validity
    bitmap (``pyarrow.compute.is_null`` would load the compute module, 0.02 s)."""
    import numpy as np
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.indices
    n, off = len(arr), arr.offset
    validity = arr.buffers()[0]
    if not arr.null_count:
        return np.zeros(n, bool)
    if validity is None:  # no bitmap, yet nulls: a null-typed column, null everywhere
        return np.ones(n, bool)
    return ~np.unpackbits(np.frombuffer(validity, np.uint8), count=off + n, bitorder="little")[off:].astype(bool)


def numpy_to_arrow_indices(idx: Any) -> Any:
    """Row positions (numpy integers) as an arrow int64 array for ``take``, built on the
    numpy buffer (``pa.array`` would import pandas: see :func:`arrow_to_numpy`)."""
    import numpy as np
    import pyarrow as pa

    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), idx.size, [None, pa.py_buffer(idx)])

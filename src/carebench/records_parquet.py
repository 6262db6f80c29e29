"""``records.parquet``: the rows of ``records.jsonl`` again, columnar, for fast re-scoring.

``records.jsonl`` stays the readable record. Beside it the run writes the same rows
through pyarrow: the scalar fields a suite scores from as columns (read without
touching the rest) and each whole row as JSON in column ``json`` (so any row can be
rebuilt exactly). Parsing a paper-scale support run's 332 MB of JSONL took 10.7 s;
reading its verdict columns from Parquet takes a fraction of that.

The Parquet file remembers the size and modification time of the ``records.jsonl``
it was written with; if the JSONL changed since (a hand-edited run), or there is no
Parquet file (an older run), readers use the JSONL.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PARQUET = "records.parquet"
_META = b"carebench.records_jsonl"


def write_records_parquet(run_dir: Path, rows: Sequence[dict[str, Any]], lines: Sequence[str],
                          columns: Sequence[str]) -> None:
    """Write ``records.parquet`` (atomically) after ``records.jsonl`` has been written from
    the same (scrubbed) ``rows``, whose JSON ``lines`` it stores."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    st = (run_dir / "records.jsonl").stat()
    data: dict[str, list[Any]] = {c: [r.get(c) for r in rows] for c in columns}
    data["json"] = list(lines)
    table = pa.table(data)
    meta = json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns}).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META: meta})
    tmp = run_dir / f".{PARQUET}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, run_dir / PARQUET)


def fresh_parquet(run_dir: Path) -> Path | None:
    """``records.parquet`` if it exists and matches the current ``records.jsonl``."""
    import pyarrow.parquet as pq

    path = Path(run_dir) / PARQUET
    jsonl = Path(run_dir) / "records.jsonl"
    if not path.is_file() or not jsonl.is_file():
        return None
    try:
        meta = json.loads((pq.read_schema(path).metadata or {}).get(_META, b"{}"))
    except (OSError, ValueError):
        return None
    st = jsonl.stat()
    if meta.get("size") != st.st_size or meta.get("mtime_ns") != st.st_mtime_ns:
        return None
    return path


def read_parquet_columns(path: Path, columns: Sequence[str], filters: Any = None) -> Any:
    """A pyarrow table of some columns (optionally filtered, pyarrow filter syntax)."""
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=list(columns), filters=filters)

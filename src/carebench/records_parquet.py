"""``records.parquet``: the rows of ``records.jsonl`` again, columnar, for fast re-scoring.

``records.jsonl`` stays the readable record. Beside it the run writes the same rows
through pyarrow: the scalar fields a suite scores from as columns (read without
touching the rest) and each whole row as JSON in column ``json`` (so any row can be
rebuilt exactly). Parsing a paper-scale support run's 332 MB of JSONL took 10.7 s;
reading its verdict columns from Parquet takes a fraction of that.

Rows are stored grouped by ``kind`` and then ``task_id`` (when the suite stores those
columns) in row groups of :data:`ROW_GROUP_ROWS` rows, with column ``line`` holding
each row's index in ``records.jsonl``. Why: the JSON of a paper-scale run is hundreds
of MB, and Parquet can skip whole row groups by their min/max statistics, so reading
the JSON of the conversations (one kind) or of the few tasks a report shows in full
decodes only their row groups instead of every row. Readers put rows back in
``records.jsonl`` order with ``line`` (files written before it existed are in that
order already).

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

import numpy as np

PARQUET = "records.parquet"
LINE = "line"
#: rows per row group: small enough that a task filter skips most of a paper-scale
#: run's JSON, large enough that reading a whole column stays a few large reads
ROW_GROUP_ROWS = 65_536
#: columns the rows are grouped by, when the suite stores them (then ``line``)
GROUP_BY = ("kind", "task_id")
_META = b"carebench.records_jsonl"


def write_records_parquet(run_dir: Path, rows: Sequence[dict[str, Any]], lines: Sequence[str],
                          columns: Sequence[str]) -> None:
    """Write ``records.parquet`` (atomically) after ``records.jsonl`` has been written from
    the same (scrubbed) ``rows``, whose JSON ``lines`` it stores."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    st = (run_dir / "records.jsonl").stat()
    data: dict[str, Any] = {c: [r.get(c) for r in rows] for c in columns}
    data["json"] = list(lines)
    data[LINE] = np.arange(len(lines), dtype=np.int64)
    keys = [(c, "ascending") for c in GROUP_BY if c in columns] + [(LINE, "ascending")]
    # the order from the small key columns; the lists are put in it before the (large) JSON
    # column becomes an Arrow array, so it is never copied a second time
    order = pc.sort_indices(pa.table({k: data[k] for k, _ in keys}), sort_keys=keys).to_numpy()  # nulls last
    table = pa.table({c: [v[i] for i in order.tolist()] if isinstance(v, list) else v[order] for c, v in data.items()})
    meta = json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns}).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META: meta})
    tmp = run_dir / f".{PARQUET}.tmp"
    pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS)
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


def read_parquet_columns(path: Path, columns: Sequence[str], filters: Any = None, *,
                         dictionary: Sequence[str] = (), ordered: bool = True) -> Any:
    """A pyarrow table of some columns (optionally filtered, pyarrow filter syntax).

    ``dictionary`` columns are read dictionary-encoded (integer codes, no string per
    row). With ``ordered`` the rows come in ``records.jsonl`` order; otherwise in
    stored order, with column ``line`` (when the file has it) for :func:`jsonl_order`.
    """
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    cols = list(columns) + ([LINE] if LINE in names and LINE not in columns else [])
    table = pq.read_table(path, columns=cols, filters=filters,
                          read_dictionary=[c for c in dictionary if c in names] or None)
    if ordered and LINE in names:
        order = jsonl_order(table[LINE].to_numpy())
        if order is not None:
            table = table.take(order)
    return table


def jsonl_order(line: np.ndarray) -> np.ndarray | None:
    """Positions that put rows with these ``line`` numbers in file order (None: already are).

    Line numbers are unique, so a scatter into a table of line positions sorts them in
    linear time; a file that breaks that (hand-made) still gets a stable sort.
    """
    line = np.asarray(line, dtype=np.int64)
    if line.size < 2 or bool((line[1:] > line[:-1]).all()):
        return None
    if line.min() < 0:
        return np.argsort(line, kind="stable")
    slot = np.full(int(line.max()) + 1, -1, np.int64)
    slot[line] = np.arange(line.size)
    order = slot[slot >= 0]
    return order if order.size == line.size else np.argsort(line, kind="stable")

"""``records.parquet``: the rows of ``records.jsonl`` again, columnar, for fast re-scoring.

``records.jsonl`` stays the readable record. Beside it the run writes the same rows
through pyarrow: the scalar fields a suite scores from as columns (read without
touching the rest) and each whole row as JSON in column ``json`` (so any row can be
rebuilt exactly). Parsing a paper-scale support run's 332 MB of JSONL took 10.7 s;
reading its verdict columns from Parquet takes a fraction of that.

Rows are stored grouped by ``kind`` and then ``task_id`` or ``prompt_id`` (when the suite
stores those columns) in row groups of :data:`ROW_GROUP_ROWS` rows, with column ``line`` holding
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
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.datasets.files import arrow_to_numpy, numpy_to_arrow_indices

PARQUET = "records.parquet"
LINE = "line"
#: rows per row group: small enough that a task filter skips most of a paper-scale
#: run's JSON, large enough that reading a whole column stays a few large reads
ROW_GROUP_ROWS = 65_536
#: columns the rows are grouped by, when the suite stores them (then ``line``): support's
#: tasks, plural's prompts (a report's example prompts then sit in few row groups)
GROUP_BY = ("kind", "task_id", "prompt_id")
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


def read_parquet_columns(path: Path, columns: Sequence[str], where: tuple[str, Collection[str]] | None = None, *,
                         dictionary: Sequence[str] = (), ordered: bool = True) -> Any:
    """A pyarrow table of some columns; ``where=(column, values)`` keeps the rows whose
    ``column`` holds one of ``values`` (a null matches nothing).

    Row groups whose min/max statistics rule out every value are not read. This goes
    through ``pyarrow.parquet.ParquetFile``, not ``read_table``: that builds a dataset,
    whose module imports pandas (0.3 s of a re-score that has 3 s in all).

    ``dictionary`` columns are read dictionary-encoded (integer codes, no string per
    row). With ``ordered`` the rows come in ``records.jsonl`` order; otherwise in
    stored order, with column ``line`` (when the file has it) for :func:`jsonl_order`.
    """

    table, rows = _read(path, columns, where, dictionary)
    if ordered:
        order = _file_order(table, rows)
        if order is not None:
            rows = order if rows is None else rows[order]
    return table if rows is None else table.take(numpy_to_arrow_indices(rows))  # one take: the JSON is copied once


def read_parquet_texts(path: Path, column: str, where: tuple[str, Collection[str]] | None = None) -> list[str]:
    """One text column (e.g. ``json``) as Python strings in ``records.jsonl`` order;
    ``where`` as for :func:`read_parquet_columns`. The wanted rows are converted run by
    run and put in order in Python (an arrow ``take`` would load pyarrow's compute
    module, 0.02 s of a re-score, to copy strings that are converted anyway)."""
    table, rows = _read(path, [column], where)
    texts = table[column].to_pylist() if rows is None else [
        t for run in _runs(rows) for t in table[column].slice(int(run[0]), run.size).to_pylist()]
    order = _file_order(table, rows)
    return texts if order is None else [texts[i] for i in order.tolist()]


def _read(path: Path, columns: Sequence[str], where: tuple[str, Collection[str]] | None,
          dictionary: Sequence[str] = ()) -> tuple[Any, np.ndarray | None]:
    """The row groups to read, as a table of ``columns`` (and ``line`` when the file has
    it), and with ``where`` the positions of the wanted rows in that table."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    cols = list(columns) + ([LINE] if LINE in names and LINE not in columns else [])
    coded = [*dictionary, *([where[0]] if where is not None and where[0] not in cols else [])]  # tested, not returned
    pf = pq.ParquetFile(path, read_dictionary=[c for c in coded if c in names] or None)
    if where is None:
        return pf.read(columns=cols), None
    return _read_where(pf, cols, *where)


def _file_order(table: Any, rows: np.ndarray | None) -> np.ndarray | None:
    """Positions (among ``rows``, or all rows) that put them in ``records.jsonl`` order;
    None when they are in it already or the file predates column ``line``."""
    if LINE not in table.column_names:
        return None
    line = arrow_to_numpy(table[LINE])
    return jsonl_order(line if rows is None else line[rows])


def _runs(rows: np.ndarray) -> list[np.ndarray]:
    """Ascending positions split into runs of consecutive ones."""
    return np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1) if rows.size else []


def _read_where(pf: Any, cols: list[str], column: str, values: Collection[str]) -> tuple[Any, np.ndarray]:
    """The row groups of ``pf`` that may hold a row whose ``column`` is one of ``values``,
    and the positions of those rows in them (tested on the column's dictionary, not per string)."""
    import pyarrow as pa

    wanted = set(values)
    groups = [g for g in range(pf.metadata.num_row_groups)
              if _may_hold(pf.metadata.row_group(g), column, sorted(wanted))]
    read = cols + ([column] if column not in cols else [])
    table = pf.read_row_groups(groups, columns=read) if groups else pf.schema_arrow.empty_table().select(read)
    col = table[column]
    if pa.types.is_null(col.type) or not len(table):
        return table.select(cols), np.zeros(0, np.int64)
    col = col.unify_dictionaries().combine_chunks() if pa.types.is_dictionary(col.type) else (
        col.combine_chunks().dictionary_encode())
    hit = np.array([v in wanted for v in col.dictionary.to_pylist()] + [False], bool)  # [-1]: null
    return table.select(cols), np.flatnonzero(hit[arrow_to_numpy(col.indices, null=-1)])


def _may_hold(group: Any, column: str, wanted: list[str]) -> bool:
    """Whether a row group's statistics of ``column`` leave room for one of the sorted
    ``wanted`` values (no statistics: it may)."""
    import bisect

    for i in range(group.num_columns):
        chunk = group.column(i)
        if chunk.path_in_schema != column:
            continue
        st = chunk.statistics
        if st is None or not st.has_min_max:
            return True
        try:
            k = bisect.bisect_left(wanted, st.min)
            return k < len(wanted) and wanted[k] <= st.max
        except TypeError:  # statistics not comparable with the values (not text): read the group
            return True
    return True


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

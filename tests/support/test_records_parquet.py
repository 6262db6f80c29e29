"""records.parquet is grouped by kind and task for fast reads, yet every reader sees the rows
of records.jsonl in file order: the tables and rows read from it equal those read from the
JSONL alone (an independent parser), duplicates included."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from carebench.engine.skeleton import write_records
from carebench.records_parquet import jsonl_order
from carebench.support.records import PARQUET_COLUMNS, read_run_records, read_run_rows

TABLE_FIELDS = ("task", "responder", "attempt", "criterion", "judge", "met", "status", "scope")


def _rows(seed: int = 3) -> list[dict]:
    """Interleaved responses and verdicts of many tasks, duplicates with different votes,
    verdicts without status/scope, and a row of another kind."""
    rng = random.Random(seed)
    rows: list[dict] = []
    for t in range(40):
        for m in ("m-b", "m-a"):
            rows.append({"kind": "response", "task_id": f"t{t:02d}", "responder": m, "attempt": 0,
                         "turns": [{"role": "user", "content": "hi"},
                                   {"role": "assistant", "content": "" if t % 7 == 0 else f"reply {t}",
                                    "latency_s": 0.5 + t}],
                         "final_reply": "" if t % 7 == 0 else f"reply {t}", "status": "ok"})
            for c in ("c2", "c1"):
                for j in ("j3", "j1", "j2"):
                    rows.append({"kind": "verdict", "task_id": f"t{t:02d}", "responder": m, "attempt": 0,
                                 "criterion_id": c, "judge": j, "met": rng.random() < 0.6,
                                 "rationale": f"why {t} {c} {j}", "status": "ok", "scope": "final"})
    rows.append({"kind": "note", "text": "not a record the tables read"})
    rng.shuffle(rows)
    v = [i for i, r in enumerate(rows) if r["kind"] == "verdict"]
    dup = dict(rows[v[5]])
    dup["met"] = not dup["met"]  # a later duplicate: the first one recorded must win
    rows.append(dup)
    del rows[v[7]]["status"], rows[v[8]]["scope"]  # older records: defaults "ok" / "final"
    return rows


def test_parquet_tables_and_rows_equal_the_jsonl(tmp_path):
    rows = _rows()
    write_records(tmp_path, rows, PARQUET_COLUMNS)
    stored = pq.read_table(tmp_path / "records.parquet", columns=["kind", "task_id", "line"]).to_pylist()
    assert [r["line"] for r in stored] != list(range(len(rows)))  # stored grouped, not in file order
    rt, vt = read_run_records(tmp_path)
    some = {"t03", "t17", "t31"}
    detail = read_run_rows(tmp_path, some)
    everything = read_run_rows(tmp_path)
    os.remove(tmp_path / "records.parquet")  # now the same reads parse records.jsonl
    rt2, vt2 = read_run_records(tmp_path)
    assert len(vt) == sum(r["kind"] == "verdict" for r in rows) == len(vt2)
    for f in TABLE_FIELDS:
        assert np.array_equal(getattr(vt, f), getattr(vt2, f)), f
    assert (vt.tasks, vt.responders, vt.criteria, vt.judges) == (vt2.tasks, vt2.responders, vt2.criteria, vt2.judges)
    for f in ("task", "responder", "attempt", "status", "empty"):
        assert np.array_equal(getattr(rt, f), getattr(rt2, f)), f
    assert np.array_equal(rt.final_same, rt2.final_same) and rt.assistant_turns == rt2.assistant_turns
    want = [r for r in rows if r.get("task_id") in some]
    assert detail == want == read_run_rows(tmp_path, some)
    assert everything == rows


def test_jsonl_order_matches_a_stable_sort():
    rng = np.random.default_rng(0)
    line = rng.permutation(1000)[:700]
    assert np.array_equal(line[jsonl_order(line)], np.sort(line))
    assert jsonl_order(np.arange(5)) is None  # already in order
    twice = np.array([4, 1, 4, 0])  # not unique (a hand-made file): still a stable sort
    assert twice[jsonl_order(twice)].tolist() == [0, 1, 4, 4]
    assert jsonl_order(twice).tolist() == np.argsort(twice, kind="stable").tolist()


def test_old_parquet_without_line_column_reads_in_stored_order(tmp_path):
    """A records.parquet from before the grouping (file order, no ``line``) still reads."""
    rows = _rows(5)
    write_records(tmp_path, rows, PARQUET_COLUMNS)
    table = pq.read_table(tmp_path / "records.parquet")
    old = table.take(np.argsort(table["line"].to_numpy())).drop_columns(["line"])
    st = os.stat(tmp_path / "records.jsonl")
    meta = {b"carebench.records_jsonl": json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns}).encode()}
    pq.write_table(old.replace_schema_metadata(meta), tmp_path / "records.parquet")
    assert "line" not in pq.read_schema(tmp_path / "records.parquet").names
    _, vt = read_run_records(tmp_path)
    everything = read_run_rows(tmp_path)
    os.remove(tmp_path / "records.parquet")
    _, vt2 = read_run_records(tmp_path)
    for f in TABLE_FIELDS:
        assert np.array_equal(getattr(vt, f), getattr(vt2, f)), f
    assert everything == rows


def test_response_table_from_json_text_equals_the_record_path():
    """The column-wise parse gives the table the per-record path gives, on every shape of turn."""
    from carebench.support.records import ResponseRecord, ResponseTable, responses_from_json

    def turn(role, content, **extra):
        return {"role": role, "content": content, **extra}

    rows = [
        {"kind": "response", "task_id": "t2", "responder": "b", "attempt": 1, "final_reply": "  ", "status": "ok",
         "turns": [turn("user", "u"), turn("assistant", "  ", latency_s=2)]},
        {"kind": "response", "task_id": "t1", "responder": "a", "attempt": 0, "final_reply": "fine",
         "turns": [turn("user", "u"), turn("assistant", "first", status="truncated", latency_s=1.5,
                                           recollected_from={"content": "fir", "status": "truncated", "cap": 4}),
                   turn("user", "again"), turn("assistant", "fine", status="")], "usage": {"x": 1}},
        {"kind": "response", "task_id": "t1", "responder": "b", "attempt": 0, "final_reply": None,
         "status": "content_filter", "turns": None},
        {"kind": "response", "task_id": "t3", "responder": "a", "attempt": 2, "final_reply": "same",
         "status": "incomplete", "error": "timeout", "failed_turn": 1, "turns": [turn("assistant", None)]},
        {"kind": "response", "task_id": "t3", "responder": "a", "attempt": 3, "final_reply": "same", "turns": []},
    ]
    texts = [json.dumps(r) for r in rows]

    def same(a: ResponseTable, b: ResponseTable) -> None:
        for f in ("task", "responder", "attempt", "status", "empty"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert (a.tasks, a.responders) == (b.tasks, b.responders)
        assert np.array_equal(a.final_same, b.final_same)
        assert a.assistant_blank == b.assistant_blank
        assert a.assistant_turns == b.assistant_turns

    reference = ResponseTable.from_records([ResponseRecord.from_dict(r) for r in rows])
    assert reference.assistant_turns[1] == (("truncated", 1.5, True), ("ok", None, False))
    same(responses_from_json(texts), reference)
    # a null recollection, an attempt written as text: read record by record, same answer
    odd = [*rows, {**rows[0], "attempt": 7, "turns": [turn("assistant", "x", recollected_from=None)]}]
    same(responses_from_json([json.dumps(r) for r in odd]),
         ResponseTable.from_records([ResponseRecord.from_dict(r) for r in odd]))
    odd = [*rows, {**rows[0], "attempt": "8"}]  # a number written as text
    same(responses_from_json([json.dumps(r) for r in odd]),
         ResponseTable.from_records([ResponseRecord.from_dict(r) for r in odd]))


def test_row_groups_are_skipped_by_statistics_yet_every_wanted_row_is_read(tmp_path, monkeypatch):
    """With small row groups, a read of a few tasks decodes only the groups whose task_id
    range can hold them, and still returns exactly the rows of those tasks in file order."""
    import carebench.records_parquet as rp

    monkeypatch.setattr(rp, "ROW_GROUP_ROWS", 9)
    rows = _rows(11)
    write_records(tmp_path, rows, PARQUET_COLUMNS)
    pf = pq.ParquetFile(tmp_path / "records.parquet")
    assert pf.metadata.num_row_groups > 20
    some = {"t05", "t22", "nope"}
    read = [g for g in range(pf.metadata.num_row_groups)
            if rp._may_hold(pf.metadata.row_group(g), "task_id", sorted(some))]
    assert 0 < len(read) < pf.metadata.num_row_groups / 2
    assert read_run_rows(tmp_path, some) == [r for r in rows if r.get("task_id") in some]
    assert read_run_rows(tmp_path, set()) == []
    rt, vt = read_run_records(tmp_path)
    os.remove(tmp_path / "records.parquet")
    rt2, vt2 = read_run_records(tmp_path)
    for f in TABLE_FIELDS:
        assert np.array_equal(getattr(vt, f), getattr(vt2, f)), f
    assert np.array_equal(rt.task, rt2.task) and np.array_equal(rt.final_same, rt2.final_same)


def test_arrow_columns_to_numpy_without_pandas_equal_pyarrows_own_conversion():
    import pyarrow as pa

    from carebench.datasets.files import arrow_to_numpy, numpy_to_arrow_indices

    ints = pa.chunked_array([pa.array([3, 1, 4], pa.int32()), pa.array([1, 5, 9, 2], pa.int32())])
    assert arrow_to_numpy(ints).tolist() == ints.to_numpy().tolist()
    bools = pa.array([True, False, True, True, False, False, True, False, True, True])
    for off in range(4):  # bit-packed data at every offset
        part = bools.slice(off, 6)
        assert arrow_to_numpy(part).tolist() == part.to_numpy(zero_copy_only=False).tolist()
    with_nulls = pa.array([1.5, None, 2.5, None], pa.float64()).slice(1)
    assert arrow_to_numpy(with_nulls, null=-1.0).tolist() == [-1.0, 2.5, -1.0]
    with pytest.raises(ValueError, match="null"):
        arrow_to_numpy(with_nulls)
    assert arrow_to_numpy(pa.array([], pa.int64())).tolist() == []
    idx = numpy_to_arrow_indices(np.array([2, 0], np.int32))
    assert pa.table({"a": ["x", "y", "z"]}).take(idx)["a"].to_pylist() == ["z", "x"]


def test_reading_a_run_from_parquet_imports_neither_pandas_nor_the_dataset_module(tmp_path):
    """pyarrow's read_table, to_numpy and pa.array import pandas (0.2 s of a re-score), its
    compute module costs 0.02 s more."""
    import subprocess
    import sys

    write_records(tmp_path, _rows(), PARQUET_COLUMNS)
    code = ("import sys\nfrom carebench.support.records import read_run_records, read_run_rows\n"
            f"rt, vt = read_run_records({str(tmp_path)!r})\nrows = read_run_rows({str(tmp_path)!r}, {{'t03'}})\n"
            "assert len(vt) and rows\nprint('pandas' in sys.modules, 'pyarrow.dataset' in sys.modules, "
            "'pyarrow.compute' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_string_codes_equal_pandas_factorize_sorted():
    # the support tables code strings without pandas; pandas is the reference
    import numpy as np
    import pandas as pd

    from carebench.support.records import _codes

    rng = np.random.default_rng(3)
    values = [f"m{int(i)}" for i in rng.integers(0, 40, 5000)] + ["é", "Z", "a b"]
    codes, vocab = _codes(values)
    ref_codes, ref_vocab = pd.factorize(np.asarray(values, dtype=object), sort=True)
    assert vocab == list(ref_vocab) and np.array_equal(codes, ref_codes) and codes.dtype == np.int32
    empty_codes, empty_vocab = _codes([])
    assert empty_vocab == [] and empty_codes.size == 0
    fixed, given = _codes(["b", "a", "b"], ["a", "b", "c"])
    assert given == ["a", "b", "c"] and fixed.tolist() == [1, 0, 1]

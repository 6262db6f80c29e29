"""Support-suite records and the integer-coded tables every analysis runs on.

A run writes one ``records.jsonl`` line per regenerated conversation
(:class:`ResponseRecord`) and one per single judge verdict on one criterion
(:class:`VerdictRecord`). Re-scoring must handle ~1.6 M verdicts in seconds, so
the analyses never touch per-verdict Python objects: records are turned once
into column arrays (:class:`VerdictTable`, :class:`ResponseTable`) whose string
fields are factorized into integer codes with sorted vocabularies (sorted so a
re-score of the same records gives byte-identical metrics whatever the line
order). :func:`read_records` parses a JSONL file straight into those tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.criteria import SCOPES
from carebench.datasets.files import ColumnarFallback as _ArrowFallback
from carebench.datasets.files import arrow_codes as _arrow_codes
from carebench.datasets.files import arrow_is_null as _arrow_is_null
from carebench.datasets.files import arrow_to_numpy as _arrow_to_numpy
from carebench.datasets.files import read_jsonl_table, read_rows
from carebench.types import CarebenchError

#: Statuses of a regenerated conversation (DistressBench E.6, G). ``incomplete``: a call
#: failed after every retry (a harness failure), so the conversation has no final reply;
#: it is never judged or scored, only counted. ``error`` is the same outcome in older records.
RESPONSE_STATUSES: tuple[str, ...] = ("ok", "empty", "content_filter", "truncated", "error", "incomplete")
INCOMPLETE = "incomplete"
HARNESS_FAILURE_STATUSES: frozenset[str] = frozenset({"error", INCOMPLETE})
#: Statuses of one judge verdict. ``not_judged_empty``: the final turn was empty,
#: the criterion was never sent to a judge and scores zero.
VERDICT_STATUSES: tuple[str, ...] = ("ok", "parse_error", "error", "not_judged_empty")

#: Vote codes in :attr:`VerdictTable.met`.
MET, NOT_MET, FAILED = 1, 0, -1

REFERENCE = "reference"


@dataclass(slots=True)
class ResponseRecord:
    """One regenerated conversation: a responder's attempt at a task."""

    task_id: str
    responder: str
    attempt: int
    turns: list[dict[str, str]] = field(default_factory=list)
    final_reply: str = ""
    status: str = "ok"
    usage: dict[str, int] | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    error: str | None = None  # harness failure message (status ``incomplete``)
    failed_turn: int | None = None  # the turn whose call failed
    kind: str = "response"

    def to_dict(self) -> dict[str, Any]:
        extra = {"error": self.error, "failed_turn": self.failed_turn} if self.error is not None else {}
        return {
            **extra,
            "kind": "response",
            "task_id": self.task_id,
            "responder": self.responder,
            "attempt": self.attempt,
            "turns": [dict(t) for t in self.turns],
            "final_reply": self.final_reply,
            "status": self.status,
            "usage": self.usage,
            "latency_s": self.latency_s,
            "cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResponseRecord:
        try:
            return cls(
                task_id=str(d["task_id"]),
                responder=str(d["responder"]),
                attempt=int(d["attempt"]),
                turns=[dict(t) for t in d.get("turns") or []],
                final_reply=str(d.get("final_reply") or ""),
                status=str(d.get("status") or "ok"),
                usage=d.get("usage"),
                latency_s=d.get("latency_s"),
                cost_usd=d.get("cost_usd"),
                error=d.get("error"),
                failed_turn=d.get("failed_turn"),
            )
        except KeyError as e:
            raise CarebenchError(f"response record lacks field {e.args[0]!r}") from None

    @property
    def all_turns_blank(self) -> bool:
        """No assistant turn has text: nothing to credit even in credit-anywhere scope."""
        if self.is_harness_failure:
            return False
        replies = [t for t in self.turns if t.get("role") == "assistant"]
        if not replies:
            return self.is_empty
        return all(not (t.get("content") or "").strip() for t in replies)

    @property
    def is_harness_failure(self) -> bool:
        return self.status in HARNESS_FAILURE_STATUSES

    @property
    def is_empty(self) -> bool:
        """An empty final turn scores zero without being judged (DistressBench, §3.2, E.6)."""
        return is_empty_reply(self.final_reply, self.status)


def is_empty_reply(final_reply: str | None, status: str) -> bool:
    """Empty = no visible text in the final assistant turn the endpoint returned.

    ``status == "empty"`` counts as empty too; a content-filtered call with no
    text is empty (scored 0) but keeps its own status for E.6. A harness failure
    (the call failed, ``incomplete``) is not a reply at all, so never empty.
    """
    if status in HARNESS_FAILURE_STATUSES:
        return False
    return status == "empty" or not (final_reply or "").strip()


@dataclass(slots=True)
class VerdictRecord:
    """One judge's verdict on one criterion of one conversation.

    ``met`` is None when the judge's output failed to parse or the call failed,
    or when the criterion was not judged because the final turn was empty.
    """

    task_id: str
    responder: str
    attempt: int
    criterion_id: str
    judge: str
    met: bool | None
    rationale: str = ""
    status: str = "ok"
    scope: str = "final"
    kind: str = "verdict"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "verdict",
            "task_id": self.task_id,
            "responder": self.responder,
            "attempt": self.attempt,
            "criterion_id": self.criterion_id,
            "judge": self.judge,
            "met": self.met,
            "rationale": self.rationale,
            "status": self.status,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VerdictRecord:
        try:
            met = d.get("met")
            return cls(
                task_id=str(d["task_id"]),
                responder=str(d["responder"]),
                attempt=int(d["attempt"]),
                criterion_id=str(d["criterion_id"]),
                judge=str(d["judge"]),
                met=None if met is None else bool(met),
                rationale=str(d.get("rationale") or ""),
                status=str(d.get("status") or "ok"),
                scope=str(d.get("scope") or "final"),
            )
        except KeyError as e:
            raise CarebenchError(f"verdict record lacks field {e.args[0]!r}") from None


# ----------------------------------------------------------------------------- tables


def _codes(values: Sequence[Any] | np.ndarray, vocab: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Factorize strings into int32 codes over a sorted vocabulary (or a given one).

    A dict numbers the values in order of first appearance, then the numbers are
    re-ranked by the sorted values: as quick as pandas' factorize on 1.6 M strings
    (0.10 s against 0.09 s per column), without importing pandas (0.2 s)."""
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    first: dict[Any, int] = {}
    seen = np.fromiter((first.setdefault(v, len(first)) for v in items), np.int64, count=len(items))
    order = sorted(first, key=str)
    uniques = [str(u) for u in order]
    rank = np.empty(len(first), np.int32)
    rank[[first[u] for u in order]] = np.arange(len(order), dtype=np.int32)
    codes = rank[seen] if len(first) else seen.astype(np.int32)
    if vocab is None:
        return codes, uniques
    pos = {v: i for i, v in enumerate(vocab)}
    unknown = [u for u in uniques if u not in pos]
    if unknown:
        raise CarebenchError(f"unknown value(s) {unknown[:5]}; expected one of {list(vocab)}")
    remap = np.array([pos[u] for u in uniques], dtype=np.int32)
    return (remap[codes] if len(remap) else codes.astype(np.int32)), list(vocab)


@dataclass
class VerdictTable:
    """Verdicts as integer-coded columns (one row per recorded verdict, in record order).

    ``met``: 1 met, 0 not met, -1 no usable verdict (parse failure, error,
    or not judged). ``status``/``scope`` index :data:`VERDICT_STATUSES`/:data:`SCOPES`.
    ``task``/``responder``/``criterion``/``judge`` index the sorted vocabularies.
    """

    task: np.ndarray
    responder: np.ndarray
    attempt: np.ndarray
    criterion: np.ndarray
    judge: np.ndarray
    met: np.ndarray
    status: np.ndarray
    scope: np.ndarray
    tasks: list[str]
    responders: list[str]
    criteria: list[str]
    judges: list[str]

    def __len__(self) -> int:
        return int(self.task.size)

    @classmethod
    def from_columns(
        cls,
        task_id: Sequence[str] | np.ndarray,
        responder: Sequence[str] | np.ndarray,
        attempt: Sequence[int] | np.ndarray,
        criterion_id: Sequence[str] | np.ndarray,
        judge: Sequence[str] | np.ndarray,
        met: Sequence[bool | None] | np.ndarray,
        status: Sequence[str] | np.ndarray | None = None,
        scope: Sequence[str] | np.ndarray | None = None,
    ) -> VerdictTable:
        """Build from parallel columns; ``met`` may be bools/None or int codes 1/0/-1."""
        t, tasks = _codes(task_id)
        r, responders = _codes(responder)
        c, criteria = _codes(criterion_id)
        j, judges = _codes(judge)
        n = t.size
        m = _met_codes(met)
        if status is None:
            s = np.where(m == FAILED, VERDICT_STATUSES.index("parse_error"), 0).astype(np.int8)
        else:
            s = _codes(status, VERDICT_STATUSES)[0].astype(np.int8)
        sc = np.zeros(n, np.int8) if scope is None else _codes(scope, SCOPES)[0].astype(np.int8)
        # A verdict whose status is not ok carries no vote, whatever ``met`` says.
        m = np.where(s == 0, m, FAILED).astype(np.int8)
        att = np.asarray(attempt, dtype=np.int64)
        if not (r.size == att.size == c.size == j.size == m.size == s.size == sc.size == n):
            raise CarebenchError("verdict columns have different lengths")
        return cls(t, r, att, c, j, m, s, sc, tasks, responders, criteria, judges)

    @classmethod
    def from_records(cls, records: Iterable[VerdictRecord | Mapping[str, Any]]) -> VerdictTable:
        cols: dict[str, list[Any]] = {k: [] for k in _VERDICT_COLS}
        for rec in records:
            d = rec.to_dict() if isinstance(rec, VerdictRecord) else rec
            for k in _VERDICT_COLS:
                cols[k].append(d.get(k))
        return cls._from_dict_columns(cols)

    @classmethod
    def _from_dict_columns(cls, cols: Mapping[str, list[Any]]) -> VerdictTable:
        status = [s or "ok" for s in cols["status"]]
        scope = [s or "final" for s in cols["scope"]]
        return cls.from_columns(
            cols["task_id"], cols["responder"], cols["attempt"], cols["criterion_id"], cols["judge"],
            cols["met"], status, scope,
        )

    def to_frame(self) -> Any:
        """Human-readable tidy frame (a pandas DataFrame of categoricals, so it stays small)."""
        import pandas as pd

        return pd.DataFrame({
            "task_id": pd.Categorical.from_codes(self.task, self.tasks),
            "responder": pd.Categorical.from_codes(self.responder, self.responders),
            "attempt": self.attempt,
            "criterion_id": pd.Categorical.from_codes(self.criterion, self.criteria),
            "judge": pd.Categorical.from_codes(self.judge, self.judges),
            "met": pd.array(np.where(self.met < 0, pd.NA, self.met == MET), dtype="boolean"),
            "status": pd.Categorical.from_codes(self.status, VERDICT_STATUSES),
            "scope": pd.Categorical.from_codes(self.scope, SCOPES),
        })


_VERDICT_COLS = ("task_id", "responder", "attempt", "criterion_id", "judge", "met", "status", "scope")


def _met_codes(met: Sequence[bool | None] | np.ndarray) -> np.ndarray:
    arr = np.asarray(met)
    if arr.dtype.kind in "iu":
        if arr.size and not np.isin(arr, (MET, NOT_MET, FAILED)).all():
            raise CarebenchError("integer met codes must be 1, 0 or -1")
        return arr.astype(np.int8)
    if arr.dtype == bool:
        return arr.astype(np.int8)
    out = np.full(arr.size, FAILED, np.int8)
    for i, v in enumerate(arr.tolist()):
        if v is True or v == 1:
            out[i] = MET
        elif v is False or v == 0:
            out[i] = NOT_MET
    return out


@dataclass
class ResponseTable:
    """One row per regenerated conversation (task x responder x attempt)."""

    task: np.ndarray
    responder: np.ndarray
    attempt: np.ndarray
    status: np.ndarray
    empty: np.ndarray
    tasks: list[str]
    responders: list[str]
    #: Per row: emptiness of each assistant turn in order (multi-turn blank propagation, E.6);
    #: None when the turns were not recorded (e.g. synthetic tables).
    assistant_blank: list[tuple[bool, ...]] | None = None
    #: Per row, per assistant turn: status, latency (s), and whether the turn was re-collected
    #: with a larger cap after truncation (Appendix G, E.6); None when turns were not recorded.
    assistant_turns: list[tuple[tuple[str, float | None, bool], ...]] | None = None
    #: Per row: a number shared by exactly the rows whose final replies are byte-identical
    #: (identical replies across attempts, Appendix G); None when replies were not recorded.
    final_same: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.task.size)

    @classmethod
    def from_columns(
        cls,
        task_id: Sequence[str] | np.ndarray,
        responder: Sequence[str] | np.ndarray,
        attempt: Sequence[int] | np.ndarray,
        status: Sequence[str] | np.ndarray,
        empty: Sequence[bool] | np.ndarray | None = None,
        final_reply: Sequence[str] | None = None,
        assistant_blank: list[tuple[bool, ...]] | None = None,
    ) -> ResponseTable:
        t, tasks = _codes(task_id)
        r, responders = _codes(responder)
        s = _codes(status, RESPONSE_STATUSES)[0].astype(np.int8)
        if empty is None:
            if final_reply is None:
                e = s == RESPONSE_STATUSES.index("empty")
            else:
                e = np.array(
                    [is_empty_reply(f, RESPONSE_STATUSES[k]) for f, k in zip(final_reply, s.tolist(), strict=True)],
                    dtype=bool,
                )
        else:
            e = np.asarray(empty, dtype=bool)
        return cls(t, r, np.asarray(attempt, np.int64), s, e, tasks, responders, assistant_blank)

    @classmethod
    def from_records(cls, records: Iterable[ResponseRecord | Mapping[str, Any]]) -> ResponseTable:
        recs = [r if isinstance(r, ResponseRecord) else ResponseRecord.from_dict(r) for r in records]
        blanks = [
            tuple(not (t.get("content") or "").strip() for t in r.turns if t.get("role") == "assistant")
            for r in recs
        ]
        table = cls.from_columns(
            [r.task_id for r in recs],
            [r.responder for r in recs],
            [r.attempt for r in recs],
            [r.status for r in recs],
            empty=[r.is_empty for r in recs],
            assistant_blank=blanks if any(blanks) else None,
        )
        if any(blanks):
            table.assistant_turns = [
                tuple((str(t.get("status") or "ok"), t.get("latency_s"), "recollected_from" in t)
                      for t in r.turns if t.get("role") == "assistant")
                for r in recs
            ]
        table.final_same = _same_codes(r.final_reply for r in recs)
        return table


def _same_codes(values: Iterable[str]) -> np.ndarray:
    """Equal values get equal numbers (numbered in order of first appearance)."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(v, len(codes)) for v in values], np.int64)


def read_records(path: str | Path) -> tuple[ResponseTable, VerdictTable]:
    """Parse a run's ``records.jsonl`` into the two tables (other kinds are skipped).

    Verdict lines (the bulk: ~1.6 M at DistressBench's scale) are read column-wise by
    pyarrow's multithreaded JSON reader, with no per-verdict Python object;
    response lines (one per conversation) are parsed with ``json``. Any file
    pyarrow rejects is re-read line by line so the error names its line.
    """
    p = Path(path)
    if not p.is_file():
        raise CarebenchError(f"{p}: records file not found")
    try:
        verdicts = _read_verdicts_arrow(p)
    except _ArrowFallback:
        return _read_records_python(p)
    responses: list[dict[str, Any]] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            # every JSON string quote is escaped, so this substring only occurs as a value/key
            if '"response"' not in line:
                continue
            d = json.loads(line)
            if d.get("kind") == "response":
                try:
                    responses.append(ResponseRecord.from_dict(d).to_dict())
                except CarebenchError as e:
                    raise CarebenchError(f"{p}:{lineno}: {e}") from None
    return ResponseTable.from_records(responses), verdicts


def _read_verdicts_arrow(p: Path) -> VerdictTable:
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = pa.schema([
        ("kind", pa.string()), ("task_id", pa.string()), ("responder", pa.string()), ("attempt", pa.int64()),
        ("criterion_id", pa.string()), ("judge", pa.string()), ("met", pa.bool_()), ("status", pa.string()),
        ("scope", pa.string()),
    ])
    tab = read_jsonl_table(p, schema)
    return _verdicts_from_arrow(tab.filter(pc.equal(tab["kind"], "verdict")), p)


#: the record fields a run stores as columns of records.parquet (see carebench.records_parquet)
PARQUET_COLUMNS = ("kind", "task_id", "responder", "attempt", "criterion_id", "judge", "met", "status", "scope")


def read_run_records(run_dir: str | Path) -> tuple[ResponseTable, VerdictTable]:
    """A run directory's records: from ``records.parquet`` when it is there and matches
    ``records.jsonl`` (fast), else from ``records.jsonl``.

    From Parquet the verdict columns are read dictionary-encoded straight into the
    integer-coded table (no string or object per verdict), and only the row groups
    holding conversations are decoded for their JSON.
    """
    import pyarrow as pa

    from carebench.records_parquet import (
        LINE,
        fresh_parquet,
        jsonl_order,
        read_parquet_columns,
        read_parquet_texts,
    )

    jsonl = Path(run_dir) / "records.jsonl"
    path = fresh_parquet(Path(run_dir))
    if path is None:
        return read_records(jsonl)
    try:
        tab = read_parquet_columns(path, PARQUET_COLUMNS, dictionary=_CODED, ordered=False)
        tab = pa.table({c: tab[c].cast(getattr(pa, _ARROW_TYPES.get(c, "string"))()) if pa.types.is_null(tab[c].type)
                        else tab[c] for c in tab.column_names})  # a column null in every row has no type
        kind, kinds = _arrow_codes(tab["kind"])
        keep = _as_slice(kind == (kinds.index("verdict") if "verdict" in kinds else -1))
        order = jsonl_order(_arrow_to_numpy(tab[LINE])[keep]) if LINE in tab.column_names else None
        vt = _verdicts_from_arrow(tab, path, keep, order)
    except (_ArrowFallback, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return read_records(jsonl)
    return responses_from_json(read_parquet_texts(path, "json", where=("kind", ["response"]))), vt


def _as_slice(mask: np.ndarray) -> np.ndarray | slice:
    """A mask that selects one run of rows as that slice (rows stored grouped by kind are;
    indexing by a slice is a view, by a mask a copy)."""
    at = np.flatnonzero(mask)
    if at.size and at[-1] - at[0] + 1 == at.size:
        return slice(int(at[0]), int(at[-1]) + 1)
    return mask


def responses_from_json(rows: list[str]) -> ResponseTable:
    """The response table of response records given as JSON text, parsed column-wise by
    pyarrow (no dict or record object per conversation). Anything it cannot type the
    way :meth:`ResponseRecord.from_dict` reads it goes through that instead, so both
    give the same table and the same errors."""
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    text = "\n".join(rows).encode("utf-8")
    try:
        if not rows or _NULL_RECOLLECTED.search(text):  # present but null: only the slow path sees it
            raise _ArrowFallback
        tab = pj.read_json(io.BytesIO(text), parse_options=pj.ParseOptions(
            explicit_schema=_response_schema(pa), unexpected_field_behavior="ignore"))
        if any(tab[c].null_count for c in ("task_id", "responder", "attempt")):
            raise _ArrowFallback
    except (_ArrowFallback, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return ResponseTable.from_records([ResponseRecord.from_dict(json.loads(r)) for r in rows])
    final = tab["final_reply"].to_pylist()
    # every row's turns: its segment of the list's values (a null list has none); read from
    # the offsets, since flatten() would load pyarrow's compute module (0.02 s)
    turns = tab["turns"].combine_chunks()
    bounds = _arrow_to_numpy(turns.offsets).tolist()
    no_turns = _arrow_is_null(turns).tolist()
    values = turns.values
    roles, contents, states, latency = (values.field(k).to_pylist() for k in ("role", "content", "status",
                                                                                "latency_s"))
    recollected = (~_arrow_is_null(values.field("recollected_from"))).tolist()
    blanks, details = [], []
    if "assistant" in roles:  # else no assistant turn is recorded: nothing per turn
        for i, none in enumerate(no_turns):
            mine = [] if none else [k for k in range(bounds[i], bounds[i + 1]) if roles[k] == "assistant"]
            blanks.append(tuple(not (contents[k] or "").strip() for k in mine))
            details.append(tuple((str(states[k] or "ok"), latency[k], recollected[k]) for k in mine))
    table = ResponseTable.from_columns(
        tab["task_id"].to_pylist(), tab["responder"].to_pylist(), _arrow_to_numpy(tab["attempt"]),
        [s or "ok" for s in tab["status"].to_pylist()],  # null or "": ok, as from_dict reads it
        final_reply=final, assistant_blank=blanks if any(blanks) else None,
    )
    if any(blanks):
        table.assistant_turns = details
    table.final_same = _same_codes(f or "" for f in final)
    return table


_NULL_RECOLLECTED = re.compile(rb'"recollected_from"\s*:\s*null')


def _response_schema(pa: Any) -> Any:
    turn = pa.struct([("role", pa.string()), ("content", pa.string()), ("status", pa.string()),
                      ("latency_s", pa.float64()), ("recollected_from", pa.struct([("status", pa.string())]))])
    return pa.schema([("task_id", pa.string()), ("responder", pa.string()), ("attempt", pa.int64()),
                      ("status", pa.string()), ("final_reply", pa.string()), ("turns", pa.list_(turn))])


#: verdict fields read dictionary-encoded from Parquet, and the types of the others
_CODED = ("kind", "task_id", "responder", "criterion_id", "judge", "status", "scope")
_ARROW_TYPES = {"attempt": "int64", "met": "bool_"}


def read_run_rows(run_dir: str | Path, task_ids: set[str] | None = None) -> list[dict[str, Any]]:
    """Whole record rows of a run (optionally only some tasks), Parquet first."""
    from carebench.records_parquet import fresh_parquet, read_parquet_texts

    path = fresh_parquet(Path(run_dir))
    if path is not None:
        texts = read_parquet_texts(path, "json", None if task_ids is None else ("task_id", task_ids))
        return json.loads(f"[{','.join(texts)}]")  # one parse of them all: a third faster than one per row
    wanted = None
    if task_ids is not None:
        def wanted(line: str) -> bool:  # cheap pre-filter before JSON parsing (exact check follows)
            m = _TASK_ID.search(line)
            return m is None or json.loads(f'"{m.group(1)}"') in task_ids
    rows = [row for _, row in read_rows(Path(run_dir) / "records.jsonl", "jsonl", line_filter=wanted)]
    return rows if task_ids is None else [r for r in rows if r.get("task_id") in task_ids]


_TASK_ID = re.compile(r'"task_id":\s*"((?:[^"\\]|\\.)*)"')


def _verdicts_from_arrow(tab: Any, p: Path, keep: np.ndarray | slice | None = None,
                         order: np.ndarray | None = None) -> VerdictTable:
    """The verdict table of the rows ``keep`` selects (all rows: None), put in ``order``."""

    def kept(a: np.ndarray) -> np.ndarray:
        return a if keep is None else a[keep]

    def nulls(col: str) -> np.ndarray:
        return kept(_arrow_is_null(tab[col]))

    for col in ("task_id", "responder", "attempt", "criterion_id", "judge"):
        if tab[col].null_count and nulls(col).any():
            raise _ArrowFallback  # the line-by-line reader reports which line lacks the field
    cols = {}
    for col in ("task_id", "responder", "criterion_id", "judge"):
        cols[col] = _arrow_codes(tab[col], keep)
    met_codes = kept(_arrow_to_numpy(tab["met"], null=False)).astype(np.int8)
    if tab["met"].null_count:
        met_codes[nulls("met")] = FAILED
    st = _enum_codes(tab["status"], keep, VERDICT_STATUSES, "ok", p, "status")
    sc = _enum_codes(tab["scope"], keep, SCOPES, "final", p, "scope")
    met_codes = np.where(st == 0, met_codes, FAILED).astype(np.int8)
    attempt = kept(_arrow_to_numpy(tab["attempt"], null=0)).astype(np.int64)  # 0: not kept
    columns = [cols["task_id"][0], cols["responder"][0], attempt, cols["criterion_id"][0], cols["judge"][0],
               met_codes, st, sc]
    if order is not None:
        columns = [c[order] for c in columns]
    return VerdictTable(
        *columns, cols["task_id"][1], cols["responder"][1], cols["criterion_id"][1], cols["judge"][1],
    )


def _enum_codes(arr: Any, keep: np.ndarray | slice | None, allowed: Sequence[str], default: str, p: Path,
                name: str) -> np.ndarray:
    """Codes (int8) over ``allowed`` of a string column of few values; a null (a record
    without the field) is ``default``; a value outside ``allowed`` is an error naming it."""
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        arr = (arr.unify_dictionaries() if pa.types.is_dictionary(arr.type) else arr).combine_chunks()
    enc = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()
    vocab = [str(v) for v in enc.dictionary.to_pylist()]
    idx = _arrow_to_numpy(enc.indices, null=len(vocab)).astype(np.int64)  # null: one past the vocabulary
    if keep is not None:
        idx = idx[keep]
    present = np.flatnonzero(np.bincount(idx, minlength=len(vocab) + 1)[: len(vocab)])
    bad = sorted(vocab[i] for i in present if vocab[i] not in allowed)
    if bad:
        raise CarebenchError(f"{p}: verdict field {name!r} has unknown value(s) {bad[:5]}")
    lut = np.array([allowed.index(v) if v in allowed else 0 for v in vocab] + [allowed.index(default)], np.int8)
    return lut[idx]


def _read_records_python(p: Path) -> tuple[ResponseTable, VerdictTable]:
    """Line-by-line reader: slower, but names the line of any malformed record."""
    vcols: dict[str, list[Any]] = {k: [] for k in _VERDICT_COLS}
    vappend = [(k, vcols[k].append) for k in _VERDICT_COLS]
    responses: list[dict[str, Any]] = []
    for loc, d in read_rows(p, "jsonl"):
        kind = d.get("kind")
        if kind == "verdict":
            try:
                for k, app in vappend:
                    app(d.get(k) if k in ("met", "status", "scope") else d[k])
            except KeyError as e:
                raise CarebenchError(f"{p}: {loc}: verdict lacks field {e.args[0]!r}") from None
            if d["task_id"] is None or d["judge"] is None or d["criterion_id"] is None:
                raise CarebenchError(f"{p}: {loc}: verdict has a null key field")
        elif kind == "response":
            try:
                responses.append(ResponseRecord.from_dict(d).to_dict())
            except CarebenchError as e:
                raise CarebenchError(f"{p}: {loc}: {e}") from None
    return ResponseTable.from_records(responses), VerdictTable._from_dict_columns(vcols)


def write_records(path: str | Path, records: Iterable[ResponseRecord | VerdictRecord]) -> None:
    """Write records as JSONL (one ``kind``-tagged object per line)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records)

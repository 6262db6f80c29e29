"""Plural run records and the dense arrays every analysis runs on.

A run writes one ``records.jsonl`` line per system response
(:class:`ResponseRecord`: a system answering one prompt under one archetype's
instruction) and one per judge verdict on that response against one profile's
reference policy (:class:`JudgmentRecord`). Re-scoring reads them back into
:class:`JuryData`: arrays indexed ``[system, profile, prompt, judge]`` over
sorted vocabularies, so a rescore of the same records gives byte-identical
metrics whatever the line order, and a paper-scale run (180,090 verdicts) is
scored in seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.datasets.files import ColumnarFallback as _ArrowFallback
from carebench.datasets.files import arrow_codes as _arrow_codes
from carebench.datasets.files import read_jsonl_table
from carebench.plural.scoring import ERROR, JUDGMENT_STATUSES, category_mask
from carebench.types import CarebenchError

#: Statuses of one system response (as the runner records a completion).
RESPONSE_STATUSES: tuple[str, ...] = ("ok", "empty", "content_filter", "truncated", "error")
#: Response statuses that are the system's answer but carry no text to judge.
UNJUDGEABLE = ("empty", "content_filter")


@dataclass(slots=True)
class ResponseRecord:
    """One system's reply to one prompt under one archetype instruction."""

    system: str
    archetype: str
    prompt_id: str
    text: str
    status: str = "ok"
    usage: dict[str, int] | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "response", "system": self.system, "archetype": self.archetype,
                "prompt_id": self.prompt_id, "status": self.status, "text": self.text,
                "usage": self.usage, "latency_s": self.latency_s, "cost_usd": self.cost_usd,
                "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResponseRecord:
        return cls(str(d["system"]), str(d["archetype"]), str(d["prompt_id"]), str(d.get("text") or ""),
                   str(d.get("status") or "ok"), d.get("usage"), d.get("latency_s"), d.get("cost_usd"),
                   d.get("error"))


@dataclass(slots=True)
class JudgmentRecord:
    """One judge's verdict on one response against one profile's reference policy."""

    system: str
    archetype: str
    prompt_id: str
    profile: str
    judge: str
    status: str  # one of JUDGMENT_STATUSES
    appropriate: bool | None = None
    categories: list[str] = field(default_factory=list)
    rationale: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "judgment", "system": self.system, "archetype": self.archetype,
                "prompt_id": self.prompt_id, "profile": self.profile, "judge": self.judge,
                "status": self.status, "appropriate": self.appropriate,
                "categories": list(self.categories), "rationale": self.rationale}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgmentRecord:
        return cls(str(d["system"]), str(d["archetype"]), str(d["prompt_id"]), str(d["profile"]),
                   str(d["judge"]), str(d.get("status") or "ok"), d.get("appropriate"),
                   list(d.get("categories") or []), str(d.get("rationale") or ""))


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """What scoring needs of a sampled prompt: its cluster and its context."""

    id: str
    source_id: str
    context: str
    source_group: str = ""

    @classmethod
    def of(cls, prompt: Any) -> PromptInfo:
        """From a :class:`carebench.datasets.prompts.PromptRecord` (the cluster is its post)."""
        return cls(prompt.id, prompt.source_id, prompt.context, prompt.source_group)


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """What scoring needs of one profile's reference policy for one prompt."""

    prompt_id: str
    profile: str
    archetype: str
    response: tuple[str, ...]
    nssi_severity: int | None = None
    suicidal_severity: int | None = None


@dataclass
class JuryData:
    """Everything scoring reads, as dense arrays over sorted vocabularies.

    ``status[s, p, n, j]`` holds :data:`JUDGMENT_STATUSES` codes; cells with no
    recorded judgment are ``ERROR`` and ``present`` is false there.
    ``policy[p, n]`` is the profile's RESPONSE set as a bitmask over
    ``categories``; ``nssi``/``suicidal`` are its severities (0 = none).
    """

    systems: list[str]
    profiles: list[str]
    archetype_of: list[str]
    prompts: list[PromptInfo]
    judges: list[str]
    categories: list[str]
    status: np.ndarray
    present: np.ndarray
    appropriate: np.ndarray
    satisfied: np.ndarray
    policy: np.ndarray
    has_policy: np.ndarray
    nssi: np.ndarray
    suicidal: np.ndarray
    response_status: dict[str, dict[str, dict[str, int]]]  # system -> archetype -> status -> count

    @property
    def archetypes(self) -> list[str]:
        return sorted(set(self.archetype_of))

    @property
    def groups(self) -> np.ndarray:
        return np.array([p.source_id for p in self.prompts], dtype=object)

    @property
    def contexts(self) -> np.ndarray:
        return np.array([p.context for p in self.prompts], dtype=object)


Coded = tuple[np.ndarray, list[str]]  # int codes over a sorted vocabulary


def _factorize(values: Sequence[Any]) -> Coded:
    vocab = sorted({str(v) for v in values})
    pos = {v: i for i, v in enumerate(vocab)}
    return np.fromiter((pos[str(v)] for v in values), np.int32, len(values)), vocab


@dataclass
class JudgmentColumns:
    """Recorded verdicts as columns (string fields coded over sorted vocabularies), plus
    the response status counts: everything scoring needs from ``records.jsonl``."""

    system: Coded
    profile: Coded
    prompt_id: Coded
    judge: Coded
    status: np.ndarray  # JUDGMENT_STATUSES codes
    appropriate: np.ndarray  # bool
    satisfied: np.ndarray  # category bitmask
    response_counts: dict[tuple[str, str, str], int]  # (system, archetype, status) -> responses
    #: full record rows (responses, then judgments) of the prompts asked for as examples
    examples: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])

    def __len__(self) -> int:
        return int(self.status.size)

    @classmethod
    def from_records(
        cls,
        responses: Iterable[ResponseRecord | Mapping[str, Any]],
        judgments: Iterable[JudgmentRecord | Mapping[str, Any]],
        categories: Sequence[str],
    ) -> JudgmentColumns:
        cols: dict[str, list[Any]] = {k: [] for k in ("system", "profile", "prompt_id", "judge", "status",
                                                      "appropriate", "categories")}
        for rec in judgments:
            d = rec.to_dict() if isinstance(rec, JudgmentRecord) else rec
            for k, col in cols.items():
                col.append(d.get(k))
        counts: Counter[tuple[str, str, str]] = Counter()
        for rec in responses:
            d = rec.to_dict() if isinstance(rec, ResponseRecord) else rec
            counts[(str(d["system"]), str(d["archetype"]), str(d.get("status") or "ok"))] += 1
        st_of = {s: i for i, s in enumerate(JUDGMENT_STATUSES)}
        try:
            status = np.fromiter((st_of[x or "ok"] for x in cols["status"]), np.int8, len(cols["status"]))
        except KeyError as e:
            raise CarebenchError(f"judgment status {e.args[0]!r} is not one of {list(JUDGMENT_STATUSES)}") from None
        masks: dict[tuple[str, ...], int] = {}

        def mask(cats: Any) -> int:
            key = tuple(cats or ())
            if key not in masks:
                masks[key] = category_mask(key, categories)
            return masks[key]

        n = len(cols["system"])
        return cls(_factorize(cols["system"]), _factorize(cols["profile"]), _factorize(cols["prompt_id"]),
                   _factorize(cols["judge"]), status,
                   np.fromiter((bool(x) for x in cols["appropriate"]), bool, n),
                   np.fromiter((mask(x) for x in cols["categories"]), np.int64, n), dict(counts))


def _index(coded: Coded, position: Mapping[str, int], what: str) -> np.ndarray:
    codes, vocab = coded
    try:
        remap = np.array([position[v] for v in vocab], np.int64)
    except KeyError as e:
        raise CarebenchError(f"judgment of {what} {e.args[0]!r}, which is not in the run") from None
    return remap[codes] if len(vocab) else codes.astype(np.int64)


def build_jury_data(
    prompts: Sequence[PromptInfo],
    policies: Iterable[PolicyInfo],
    columns: JudgmentColumns,
    categories: Sequence[str],
) -> JuryData:
    """Dense arrays from records. Unknown prompts, profiles or categories are errors."""
    prompts = sorted(prompts, key=lambda p: p.id)
    n_of = {p.id: i for i, p in enumerate(prompts)}
    if len(n_of) != len(prompts):
        raise CarebenchError("sampled prompts repeat an id")
    policies = list(policies)
    profiles = sorted({p.profile for p in policies})
    p_of = {p: i for i, p in enumerate(profiles)}
    archetype_of = [""] * len(profiles)
    P, N = len(profiles), len(prompts)
    policy = np.zeros((P, N), np.int64)
    has_policy = np.zeros((P, N), bool)
    nssi = np.zeros((P, N), np.int8)
    suicidal = np.zeros((P, N), np.int8)
    for pol in policies:
        n = n_of.get(pol.prompt_id)
        if n is None:
            continue  # a policy of a prompt outside the sample
        p = p_of[pol.profile]
        archetype_of[p] = pol.archetype
        policy[p, n] = category_mask(pol.response, categories)
        has_policy[p, n] = True
        nssi[p, n] = pol.nssi_severity or 0
        suicidal[p, n] = pol.suicidal_severity or 0
    counts = columns.response_counts
    systems = sorted(set(columns.system[1]) | {s for s, _, _ in counts})
    resp_status: dict[str, dict[str, dict[str, int]]] = {}
    for (s, a, st), c in sorted(counts.items()):
        resp_status.setdefault(s, {}).setdefault(a, {})[st] = c
    judges = list(columns.judge[1])
    S, J = len(systems), len(judges)
    status = np.full((S, P, N, J), ERROR, np.int8)
    present = np.zeros((S, P, N, J), bool)
    appropriate = np.zeros((S, P, N, J), bool)
    satisfied = np.zeros((S, P, N, J), np.int64)
    idx = (
        _index(columns.system, {s: i for i, s in enumerate(systems)}, "system"),
        _index(columns.profile, p_of, "profile"),
        _index(columns.prompt_id, n_of, "prompt"),
        columns.judge[0].astype(np.int64),
    )
    status[idx] = columns.status
    present[idx] = True
    appropriate[idx] = columns.appropriate
    satisfied[idx] = columns.satisfied
    return JuryData(systems, profiles, archetype_of, list(prompts), judges, list(categories), status, present,
                    appropriate, satisfied, policy, has_policy, nssi, suicidal, resp_status)


#: the record fields a run stores as columns of records.parquet (see carebench.records_parquet)
PARQUET_COLUMNS = ("kind", "system", "archetype", "prompt_id", "profile", "judge", "status", "appropriate",
                   "categories")
_CODED = ("kind", "system", "archetype", "prompt_id", "profile", "judge", "status")
_RESPONSE_FIELDS = ("kind", "system", "archetype", "prompt_id", "status", "text", "error")
_JUDGMENT_FIELDS = ("kind", "system", "archetype", "prompt_id", "profile", "judge", "status", "appropriate",
                    "categories", "rationale")


def read_jury_columns(path: Path, categories: Sequence[str], examples: set[str] | None = None) -> JudgmentColumns:
    """Scoring columns of a run's ``records.jsonl``.

    From ``records.parquet`` beside it when that matches the JSONL (a run written since
    Parquet was added): the scoring fields are columns there, read without parsing any
    JSON. Otherwise the verdict lines (180,090 at paper scale) are read column-wise by
    pyarrow's multithreaded JSON reader, skipping the free text; any file pyarrow
    rejects is re-read line by line so the error names its line. The full rows of the
    prompts in ``examples`` are kept (for the report).
    """
    p = Path(path)
    if not p.is_file():
        raise CarebenchError(f"{p}: records file not found")
    try:
        from carebench.records_parquet import fresh_parquet

        parquet = fresh_parquet(p.parent) if p.name == "records.jsonl" else None
        if parquet is not None:
            return _read_columns_parquet(p, parquet, categories, examples or set())
        return _read_columns_arrow(p, categories, examples or set())
    except _ArrowFallback:
        responses, judgments = read_records(p)
        cols = JudgmentColumns.from_records(responses, judgments, categories)
        keep = examples or set()
        cols.examples = ([r for r in responses if r["prompt_id"] in keep],
                         [j for j in judgments if j["prompt_id"] in keep])
        return cols


def _read_columns_arrow(p: Path, categories: Sequence[str], examples: set[str]) -> JudgmentColumns:
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = pa.schema([
        ("kind", pa.string()), ("system", pa.string()), ("archetype", pa.string()), ("prompt_id", pa.string()),
        ("profile", pa.string()), ("judge", pa.string()), ("status", pa.string()), ("appropriate", pa.bool_()),
        ("categories", pa.list_(pa.string())), ("text", pa.string()), ("rationale", pa.string()),
        ("error", pa.string()),
    ])
    tab = read_jsonl_table(p, schema)
    kinds = set(pc.unique(tab["kind"]).to_pylist())
    if not kinds <= {"response", "judgment"}:
        raise _ArrowFallback  # the line reader names the line with the bad kind
    shown = tab.filter(pc.is_in(tab["prompt_id"], value_set=pa.array(sorted(examples), pa.string())))
    rows = shown.to_pylist()
    example_rows = ([{k: r[k] for k in _RESPONSE_FIELDS} for r in rows if r["kind"] == "response"],
                    [{k: r[k] for k in _JUDGMENT_FIELDS} for r in rows if r["kind"] == "judgment"])
    return _columns_from_table(p, tab.drop_columns(["text", "rationale", "error"]), categories, example_rows)


def _read_columns_parquet(p: Path, parquet: Path, categories: Sequence[str], examples: set[str]) -> JudgmentColumns:
    """The same columns from ``records.parquet``: the scoring fields as (dictionary-coded)
    columns, and the JSON of only the example prompts' rows."""
    import json

    import pyarrow as pa
    import pyarrow.compute as pc

    from carebench.records_parquet import read_parquet_columns, read_parquet_texts

    types = {"appropriate": pa.bool_(), "categories": pa.list_(pa.string())}
    tab = read_parquet_columns(parquet, PARQUET_COLUMNS, dictionary=_CODED)
    tab = pa.table({c: tab[c].cast(types.get(c, pa.string())) if pa.types.is_null(tab[c].type) else tab[c]
                    for c in PARQUET_COLUMNS})  # a column null in every row has no type
    if not {str(k) for k in pc.unique(tab["kind"]).to_pylist()} <= {"response", "judgment"}:
        raise _ArrowFallback
    rows = [json.loads(t) for t in read_parquet_texts(parquet, "json", ("prompt_id", examples))] if examples else []
    example_rows = ([{k: r.get(k) for k in _RESPONSE_FIELDS} for r in rows if r.get("kind") == "response"],
                    [{k: r.get(k) for k in _JUDGMENT_FIELDS} for r in rows if r.get("kind") == "judgment"])
    return _columns_from_table(p, tab, categories, example_rows)


def _columns_from_table(p: Path, tab: Any, categories: Sequence[str],
                        example_rows: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> JudgmentColumns:
    """Jury columns from a table of the scoring fields (JSONL or Parquet alike)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    resp = tab.filter(pc.equal(tab["kind"], "response"))
    tab = tab.filter(pc.equal(tab["kind"], "judgment"))
    for col in ("system", "archetype", "prompt_id", "profile", "judge"):
        if tab[col].null_count or resp[col].null_count * (col in ("system", "archetype", "prompt_id")):
            raise _ArrowFallback  # ... and the line lacking a field
    counts: dict[tuple[str, str, str], int] = {}
    if len(resp):
        grouped = resp.select(["system", "archetype", "status"]).to_pydict()
        counts = dict(Counter(zip(grouped["system"], grouped["archetype"],
                                  [s or "ok" for s in grouped["status"]], strict=True)))
    # a dictionary-coded column keeps the responses' values (e.g. "truncated") after the filter
    st_codes, st_vocab = _arrow_codes(pc.fill_null(tab["status"].cast(pa.string()), "ok"))
    bad = [v for v in st_vocab if v not in JUDGMENT_STATUSES]
    if bad:
        raise CarebenchError(f"{p}: judgment field 'status' has unknown value(s) {bad[:5]}")
    status = (np.array([JUDGMENT_STATUSES.index(v) for v in st_vocab], np.int8)[st_codes]
              if len(tab) else np.zeros(0, np.int8))
    cats = tab["categories"].combine_chunks()
    flat = pc.list_flatten(cats)
    parents = pc.list_parent_indices(cats).to_numpy(zero_copy_only=False)
    codes, vocab = _arrow_codes(flat)
    bits = np.array([category_mask([v], categories) for v in vocab], np.int64)
    satisfied = np.zeros(len(tab), np.int64)
    if len(flat):
        np.bitwise_or.at(satisfied, parents, bits[codes])
    appropriate = pc.fill_null(tab["appropriate"], False).to_numpy(zero_copy_only=False).astype(bool)
    return JudgmentColumns(_arrow_codes(tab["system"]), _arrow_codes(tab["profile"]),
                           _arrow_codes(tab["prompt_id"]), _arrow_codes(tab["judge"]), status, appropriate,
                           satisfied, counts, example_rows)


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Response and judgment rows of a run's ``records.jsonl`` (file:line on a bad line)."""
    from carebench.engine.rundir import read_jsonl

    responses: list[dict[str, Any]] = []
    judgments: list[dict[str, Any]] = []
    for i, d in enumerate(read_jsonl(Path(path)), 1):
        kind = d.get("kind")
        if kind not in ("response", "judgment"):
            raise CarebenchError(f"{path}: record {i}: field 'kind' must be 'response' or 'judgment', got {kind!r}")
        for name in ("system", "archetype", "prompt_id", *(("profile", "judge") if kind == "judgment" else ())):
            if not isinstance(d.get(name), str):
                raise CarebenchError(f"{path}: record {i}: field {name!r} is missing or not a string")
        (judgments if kind == "judgment" else responses).append(d)
    return responses, judgments

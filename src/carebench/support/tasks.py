"""Support tasks: fixed crisis conversations with a weighted, task-specific rubric.

A task (DistressBench, §2) holds the fixed user turns of a single- or multi-turn
conversation, metadata used for slicing (§2.2, E.4), 6-20 binary criteria each
tagged with one of seven care dimensions and weighted 1-20 (§2.3), and a
reference response (§4.7). Assistant turns are never part of a task: they are
regenerated for every responder (§3.1).

Tasks load from JSONL, CSV or Parquet (or ``builtin:NAME`` package data); every
invalid row is reported with its file, line and field before any model call.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from carebench.criteria import (
    Criterion,
)
from carebench.datasets.builtin import builtin_file, builtin_name, package_file
from carebench.datasets.columns import parse_columns, rename_rows
from carebench.datasets.files import format_from_suffix, read_rows
from carebench.types import CarebenchError

#: The subcategories DistressBench names in its text (§2.2, E.2, E.6, Table 12), kept
#: as documentation only. The paper has 23 but does not list them all, and a user's
#: own task set may use any names: loading accepts every subcategory string
#: (normalised, see :func:`normalize_subcategory`). ``--subcategories FILE``
#: declares an expected set and warns about names outside it.
KNOWN_SUBCATEGORIES: tuple[str, ...] = (
    "suicidal_ideation",
    "suicide_planning",
    "post_attempt",
    "nssi",
    "psychosis",
    "eating_disorder",
    "trauma_triggered_distress",
    "self_worth",
    "existential_despair",
    "escalation_pattern",
    "masked_distress",
)

_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalize_subcategory(name: Any) -> str:
    """One spelling per subcategory: lower case, runs of other characters become ``_``.

    "Self Worth", "self-worth" and ``self_worth`` are the same subcategory, so
    slices never split one subcategory over two spellings.
    """
    if not isinstance(name, str):  # {"nested": true} once became "nested_true", 3 became "3"
        raise ValueError(f"subcategory must be a name (text), got {type(name).__name__} {name!r}")  # noqa: TRY004 - pydantic reports ValueError as the field error
    key = _NON_WORD.sub("_", name.strip().lower()).strip("_")
    if not key:
        raise ValueError(f"subcategory {name!r} is empty")
    return key


def load_subcategories(path: str | Path) -> list[str]:
    """An expected-subcategory list: one name per line, ``#`` starts a comment; names
    are normalised like task subcategories."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as e:
        raise CarebenchError(f"cannot read subcategory list {p}: {e.strerror}") from None
    names: list[str] = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            names.append(normalize_subcategory(line))
        except ValueError as e:
            raise CarebenchError(f"{p}:{i}: {e}") from None
    if not names:
        raise CarebenchError(f"{p}: no subcategory names found")
    return list(dict.fromkeys(names))


def unexpected_subcategories(tasks: Sequence[Task], expected: Sequence[str]) -> dict[str, int]:
    """Subcategories the tasks carry that the expected list lacks, with task counts."""
    allowed = {normalize_subcategory(s) for s in expected}
    out: dict[str, int] = {}
    for t in tasks:
        if t.subcategory not in allowed:
            out[t.subcategory] = out.get(t.subcategory, 0) + 1
    return dict(sorted(out.items()))


#: Metadata axes used for stratification (§A.3) and slicing (§4.4, E.4).
META_FIELDS: tuple[str, ...] = (
    "age_band",
    "turn_structure",
    "harm_intent",
    "progression_stage",
    "signal_directness",
    "split",
)
#: Axes the public/private split is stratified by (§A.3).
SPLIT_STRATA: tuple[str, ...] = (
    "subcategory",
    "age_band",
    "turn_structure",
    "harm_intent",
    "progression_stage",
)

MIN_CRITERIA, MAX_CRITERIA = 6, 20


#: the age bands as a reader reads them (DistressBench writes U18 and O18, §E.4)
AGE_BAND_NAMES = {"U18": "under 18", "O18": "18 or over"}


class TaskMeta(BaseModel):
    """Slicing metadata (§2.2); ``turn_structure`` is checked against the turn count."""

    model_config = ConfigDict(extra="allow", frozen=True)

    age_band: Literal["U18", "O18", "unknown"] = "unknown"
    turn_structure: Literal["single", "multi"] = "single"
    harm_intent: Literal["harmful", "borderline", "benign", "unknown"] = "unknown"
    progression_stage: Literal["ideation", "planning", "action", "post_action", "unknown"] = (
        "unknown"
    )
    signal_directness: Literal["implicit", "explicit", "unknown"] = "unknown"
    split: Literal["public", "private", "unassigned"] = "unassigned"


class Task(BaseModel):
    """One fixed conversation with its rubric and reference response."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    subcategory: str
    metadata: TaskMeta = Field(default_factory=TaskMeta)
    turns: tuple[str, ...] = Field(min_length=1)
    criteria: tuple[Criterion, ...]
    reference: str = ""
    #: Scripted assistant replies between the user turns (``scripted_replies[i]`` follows
    #: ``turns[i]``), as authored; shown in reports and used for the reference conversation.
    scripted_replies: tuple[str, ...] = ()
    #: The task's own system prompt (e.g. a HealthBench ``system`` message); responders get
    #: it instead of the run's ``--system-prompt`` (support.generation.turn_request).
    system_prompt: str = ""
    illustrative: bool = False
    #: BCP-47 locale with a region (``pt-BR``) of the person writing: where a reply should send
    #: them is checked against it (docs/resources.md); ``None``: the run's ``--locale``, else none
    locale: str | None = None

    @field_validator("subcategory", mode="before")
    @classmethod
    def _normalize_subcategory(cls, v: Any) -> str:
        return normalize_subcategory(v)

    @model_validator(mode="before")
    @classmethod
    def _split_messages(cls, data: Any) -> Any:
        """Turns may be plain user strings or chat messages. Scripted assistant messages
        between user turns are kept in ``scripted_replies``: responders never see them
        (every assistant turn is regenerated, §3.1), but the reference is judged after
        the scripted conversation and the report shows it."""
        if not isinstance(data, dict):
            return data
        turns = data.get("turns")
        if isinstance(turns, str):
            return {**data, "turns": (turns,)}
        if isinstance(turns, list | tuple) and any(isinstance(m, dict) for m in turns):
            try:
                users, replies = _split_turns(turns)
            except ValueError:
                return data  # the field validator reports it under ``turns``
            return {**data, "turns": users, "scripted_replies": replies}
        return data

    @field_validator("turns", mode="before")
    @classmethod
    def _valid_messages(cls, v: Any) -> Any:
        if isinstance(v, list | tuple) and any(isinstance(m, dict) for m in v):
            return _split_turns(v)[0]  # raises the structural error
        return v

    @field_validator("turns")
    @classmethod
    def _non_empty_turns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, t in enumerate(v):
            if not str(t).strip():
                raise ValueError(f"user turn {i + 1} is empty")
        return v

    @model_validator(mode="after")
    def _check(self) -> Task:
        n = len(self.criteria)
        if not MIN_CRITERIA <= n <= MAX_CRITERIA:
            raise ValueError(f"a rubric needs {MIN_CRITERIA}-{MAX_CRITERIA} criteria, got {n}")
        ids = [c.id for c in self.criteria]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate criterion id(s) {dup}")
        expect = "multi" if len(self.turns) > 1 else "single"
        if self.metadata.turn_structure != expect:
            raise ValueError(
                f"metadata.turn_structure is {self.metadata.turn_structure!r} but the task "
                f"has {len(self.turns)} user turn(s)"
            )
        return self

    @property
    def multi_turn(self) -> bool:
        return len(self.turns) > 1

    def scripted_conversation(self, final_reply: str | None = None) -> list[dict[str, str]]:
        """User turns interleaved with the scripted assistant replies (when the task has
        them), plus ``final_reply`` as the last assistant message when given."""
        out: list[dict[str, str]] = []
        for i, u in enumerate(self.turns):
            out.append({"role": "user", "content": u})
            if i < len(self.scripted_replies):
                out.append({"role": "assistant", "content": self.scripted_replies[i]})
        if final_reply is not None:
            out.append({"role": "assistant", "content": final_reply})
        return out

    def criterion(self, cid: str) -> Criterion:
        for c in self.criteria:
            if c.id == cid:
                return c
        raise KeyError(cid)

    def to_row(self) -> dict[str, Any]:
        """JSON-able row, the same shape the JSONL loader reads. A task without its own
        system prompt has no such field, so rows (and the dataset hashes of task sets
        without one) are what they were before the field existed."""
        row = self.model_dump(mode="json")
        if not row.get("system_prompt"):
            del row["system_prompt"]
        if row.get("locale") is None:
            del row["locale"]
        return row


def _split_turns(turns: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """User turns and the scripted assistant replies between them.

    An assistant message must sit between two user messages (one in every gap, or
    none at all); the reply to the last user turn belongs in ``reference``.
    """
    users: list[Any] = []
    replies: list[Any] = []
    for i, m in enumerate(turns):
        role = m.get("role", "user") if isinstance(m, dict) else "user"
        content = m.get("content", "") if isinstance(m, dict) else m
        if role == "user":
            users.append(content)
        elif role == "assistant":
            if not users or len(users) == len(replies):
                raise ValueError(f"message {i + 1}: a scripted assistant message must follow a user message")
            if len(users) > len(replies) + 1:
                raise ValueError(f"message {i + 1}: two user turns before it have no scripted reply between "
                                 "them; give one between every two user turns, or none")
            replies.append(content)
        else:
            raise ValueError(f"message {i + 1}: role must be 'user' or 'assistant', got {role!r}")
    if replies and len(replies) == len(users):
        raise ValueError("the last message is a scripted assistant reply; put the reply to the last "
                         "user turn in 'reference'")
    if replies and len(replies) != len(users) - 1:
        raise ValueError(f"{len(replies)} scripted assistant replies for {len(users)} user turns: give one "
                         "between every two user turns, or none")
    return tuple(users), tuple(replies)


# -- loading ------------------------------------------------------------------------


def _fill_defaults(row: dict[str, Any]) -> dict[str, Any]:
    """Flat rows (CSV/Parquet) carry metadata as columns and JSON-text list columns."""
    row = {k: v for k, v in row.items() if not _is_blank(v)}
    meta = row.get("metadata")
    if isinstance(meta, str):
        row["metadata"] = meta = json.loads(meta)
    if meta is None:
        meta = {}
    for f in META_FIELDS:
        if f in row:
            meta = {**meta, f: row.pop(f)}
    for key in ("turns", "criteria"):
        if isinstance(row.get(key), str):
            text = row[key].strip()
            row[key] = json.loads(text) if text.startswith(("[", "{", '"')) else [text]
    if "turns" in row and "turn_structure" not in meta and isinstance(row["turns"], list | tuple):
        users = [t for t in row["turns"] if not isinstance(t, dict) or t.get("role", "user") == "user"]
        meta = {**meta, "turn_structure": "multi" if len(users) > 1 else "single"}
    row["metadata"] = meta
    return row


def _is_blank(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and np.isnan(v):
        return True
    return isinstance(v, str) and not v.strip()


def _rows(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """(line or row number, row) from a JSONL, CSV or Parquet task file."""
    fmt = format_from_suffix(path)
    if fmt is None:
        raise CarebenchError(
            f"{path}: unsupported task file type {path.suffix.lower()!r} (use .jsonl, .csv or .parquet)"
        )
    for loc, row in read_rows(path, fmt):
        yield loc.split()[-1], row


def builtin_names() -> list[str]:
    """The task sets shipped under ``carebench/data/support``."""
    return sorted(p.stem for p in package_file("support", "").iterdir() if p.suffix == ".jsonl")


def mappable_fields() -> tuple[str, ...]:
    """Fields a ``--columns`` mapping may point at a task file's columns."""
    return (*(f for f in Task.model_fields if f != "illustrative"), *META_FIELDS)


def load_tasks(source: str | Path, columns: str | dict[str, Any] | None = None) -> list[Task]:
    """Load and validate every task; ``builtin:NAME`` reads package data.

    Any subcategory name is accepted (normalised); compare against an expected
    list with :func:`unexpected_subcategories`. ``columns``: ``field=column``
    mapping for files whose columns are named otherwise (``turns=messages,id=case``;
    see :mod:`carebench.datasets.columns`).
    Raises ``CarebenchError`` naming the file, line and field of the first bad row.
    """
    src = str(source)
    mapping = parse_columns(columns, mappable_fields())
    name = builtin_name(src)
    if mapping and name is not None:
        raise CarebenchError("--columns applies to task files, not builtin task sets")
    if name is not None:
        files = {n: f"{n}.jsonl" for n in builtin_names()}
        return _load(builtin_file("support", name, files, "built-in support task set"), label=src)
    path = Path(src)
    if not path.is_file():
        raise CarebenchError(f"task file {path} not found")
    return _load(path, label=str(path), mapping=mapping)


def _load(path: Path, label: str, mapping: dict[str, str] | None = None) -> list[Task]:
    rows = _rows(path)
    if mapping:
        rows = ((loc.split()[-1], row) for loc, row in
                rename_rows(((f"line {n}", r) for n, r in rows), mapping, label))
    flat = path.suffix.lower() not in (".jsonl", ".json", ".ndjson")  # CSV/Parquet cells are text

    def parsed() -> Iterator[tuple[str, Task]]:
        for line, raw in rows:
            if not flat and isinstance(raw.get("turns"), str):
                raise CarebenchError(f"{label}:{line}: field turns: expected a list of user turns "
                                     "(or chat messages), got a string")
            try:
                task = Task.model_validate(_fill_defaults(raw))
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in err.get("loc", ())) or "row"
                raise CarebenchError(f"{label}:{line}: field {loc}: {err.get('msg')}") from None
            except ValueError as e:  # malformed JSON inside a CSV cell
                raise CarebenchError(f"{label}:{line}: {e}") from None
            yield line, task

    return unique_tasks(parsed(), label)


def unique_tasks(numbered: Iterable[tuple[str, Task]], label: str | Path, id_field: str = "id") -> list[Task]:
    """The tasks of one file, in file order, from ``(line, task)`` pairs: a repeated task id
    (named with its line, the line it first stood on and the file's ``id_field``) or a file
    with no task is one-line ``CarebenchError``. Every task file reader ends here."""
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for line, task in numbered:
        if task.id in seen:
            raise CarebenchError(f"{label}:{line}: field {id_field}: duplicate task id {task.id!r} "
                                 f"(first on line {seen[task.id]})")
        seen[task.id] = line
        tasks.append(task)
    if not tasks:
        raise CarebenchError(f"{label}: no tasks found")
    return tasks


def write_tasks(path: Path, tasks: Sequence[Task]) -> None:
    """Write tasks as JSONL (a run directory keeps its own copy for rescoring)."""
    from carebench.engine.rundir import write_jsonl

    write_jsonl(Path(path), (t.to_row() for t in tasks))


# -- public/private split (§A.3) ------------------------------------------------------


def stratified_split(
    tasks: Sequence[Task],
    strata: Sequence[str] = SPLIT_STRATA,
    seed: int = 12345,
) -> dict[str, Literal["public", "private"]]:
    """Assign each task to public or private, 50/50 within every stratum.

    Tasks are grouped by the joint stratum key, shuffled with the seed, and dealt
    alternately; a stratum with an odd count gives its extra task to whichever
    split is currently smaller, so the overall split is as even as possible
    (718 tasks -> 359/359) while each stratum differs by at most one.
    """
    rng = np.random.default_rng(seed)
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for t in tasks:
        groups[tuple(_stratum_value(t, s) for s in strata)].append(t.id)
    counts = {"public": 0, "private": 0}
    out: dict[str, Literal["public", "private"]] = {}
    for key in sorted(groups):
        ids = sorted(groups[key])
        order = rng.permutation(len(ids))
        first: Literal["public", "private"] = (
            "public" if counts["public"] <= counts["private"] else "private"
        )
        second: Literal["public", "private"] = "private" if first == "public" else "public"
        for j, idx in enumerate(order):
            side = first if j % 2 == 0 else second
            out[ids[int(idx)]] = side
            counts[side] += 1
    return out


def _stratum_value(task: Task, field: str) -> str:
    if field == "subcategory":
        return task.subcategory
    return str(getattr(task.metadata, field))


def with_split(tasks: Sequence[Task], assignment: dict[str, str]) -> list[Task]:
    """Copies of the tasks with ``metadata.split`` set from an assignment."""
    return [
        t.model_copy(update={"metadata": t.metadata.model_copy(update={"split": assignment[t.id]})})
        for t in tasks
    ]


#: Seed of the stratified split when a task file carries none (a carebench default).
SPLIT_SEED = 12345


def select_split(tasks: Sequence[Task], which: str, seed: int = SPLIT_SEED) -> tuple[list[Task], str]:
    """The tasks of one half of the public/private split (§A.3), or all of them.

    A task file that assigns every task a split is used as is; otherwise the
    stratified 50/50 split (:func:`stratified_split`) is computed over all tasks
    with ``seed`` and written into each task's metadata. Returns the tasks and
    where the split came from (``"file"`` or ``"stratified, seed N"``).
    """
    if which not in ("public", "private", "all"):
        raise CarebenchError(f"--split must be public, private or all, got {which!r}")
    if all(t.metadata.split != "unassigned" for t in tasks):
        labelled, source = list(tasks), "file"
    else:
        labelled, source = with_split(tasks, stratified_split(tasks, seed=seed)), f"stratified, seed {seed}"
    if which == "all":
        return labelled, source
    chosen = [t for t in labelled if t.metadata.split == which]
    if not chosen:
        raise CarebenchError(f"no task in the {which} split")
    return chosen, source

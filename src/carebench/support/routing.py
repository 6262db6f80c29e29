"""Where the support suite's replies send a person: the crisis-resource check of each final reply.

A run checks every responder's final reply (the turn the headline scope scores) with
:func:`carebench.resources.check_reply` for the task's locale (else the run's ``--locale``,
else none: reported, never guessed) and records it in the response record's
``resources`` field. The metrics resample tasks (DistressBench's unit) with the run's
seed (:func:`carebench.resources.summary.routing_metrics`).

A task is at risk unless its metadata says otherwise: ``metadata.at_risk`` (true/false)
when given, else ``harm_intent`` ``benign`` is not at risk and every other value
(``harmful``, ``borderline``, ``unknown``: the suite's tasks are crisis conversations)
is at risk. Over-referral is counted on the tasks not at risk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from carebench.resources import Registry, check_reply
from carebench.resources.options import item_locale
from carebench.resources.summary import CheckedReply, routing_metrics, worst_with_text
from carebench.support.records import HARNESS_FAILURE_STATUSES

UNIT = "task"


def task_at_risk(task: Any) -> bool:
    """Whether a task is at risk (see the module docstring)."""
    meta = task.metadata
    explicit = (meta.model_extra or {}).get("at_risk")
    if isinstance(explicit, bool):
        return explicit
    return meta.harm_intent != "benign"


def check_record(row: Mapping[str, Any], task: Any, run_locale: str | None, registry: Registry) -> dict | None:
    """The ``resources`` field of one response record (``None`` for a harness failure: no reply)."""
    if row.get("status") in HARNESS_FAILURE_STATUSES:
        return None
    locale = item_locale(getattr(task, "locale", None), run_locale)
    return check_reply(row.get("final_reply") or "", locale, registry).to_dict()


def with_checks(rows: Iterable[dict[str, Any]], tasks: Sequence[Any], run_locale: str | None,
                registry: Registry) -> list[dict[str, Any]]:
    """Response record rows with their ``resources`` field set (other rows unchanged)."""
    by_id = {t.id: t for t in tasks}
    out = []
    for row in rows:
        if row.get("kind") == "response" and row.get("task_id") in by_id:
            check = check_record(row, by_id[row["task_id"]], run_locale, registry)
            row = {**row, "resources": check} if check is not None else {k: v for k, v in row.items()
                                                                          if k != "resources"}
        out.append(row)
    return out


_RESPONSE = re.compile(r'"kind":\s*"response"')


def read_response_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every response record row of a run (no verdict row is parsed), Parquet first."""
    from carebench.datasets.files import read_rows
    from carebench.records_parquet import fresh_parquet, read_parquet_texts

    path = fresh_parquet(Path(run_dir))
    if path is not None:
        texts = read_parquet_texts(path, "json", ("kind", ["response"]))
        return json.loads(f"[{','.join(texts)}]")
    rows = read_rows(Path(run_dir) / "records.jsonl", "jsonl", line_filter=lambda line: bool(_RESPONSE.search(line)))
    return [r for _, r in rows if r.get("kind") == "response"]


def checked_replies(tasks: Sequence[Any], rows: Iterable[Mapping[str, Any]]) -> list[CheckedReply]:
    """One :class:`CheckedReply` per response row that recorded a check."""
    by_id = {t.id: t for t in tasks}
    return [CheckedReply(str(r["responder"]), str(r["task_id"]), task_at_risk(by_id[r["task_id"]]), r["resources"])
            for r in rows if r.get("resources") is not None and r.get("task_id") in by_id]


def routing_block(tasks: Sequence[Any], rows: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any],
                  seed: int, B: int) -> dict[str, Any] | None:
    """The ``resources`` block of ``metrics.json`` (``None``: the run recorded no check)."""
    reg = manifest.get("resources")
    if not reg:
        return None
    return routing_metrics(checked_replies(tasks, rows), seed=seed, B=B, unit=UNIT, registry=reg)


def routed_local(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
    """(task, responder, attempt) of the replies that give at least one local resource
    (routing ``local`` or ``local_and_wrong``): the §4.6 column."""
    return {(str(r["task_id"]), str(r["responder"]), int(r["attempt"])) for r in rows
            if (r.get("resources") or {}).get("routing") in ("local", "local_and_wrong")}


def report_examples(tasks: Sequence[Any], rows: Sequence[Mapping[str, Any]], limit: int = 5
                    ) -> list[tuple[str, CheckedReply, str]]:
    """The worst replies with their text, for the report."""
    by_id = {t.id for t in tasks}
    with_text = [r for r in rows if r.get("resources") is not None and r.get("task_id") in by_id]
    return worst_with_text(checked_replies(tasks, with_text), [r.get("final_reply") or "" for r in with_text], limit)

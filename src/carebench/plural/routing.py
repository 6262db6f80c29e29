"""Where the plural suite's replies send a person: the crisis-resource check of each response.

A run checks every system's reply (under each archetype instruction) with
:func:`carebench.resources.check_reply` for the prompt's locale (else the run's
``--locale``, else none: reported, never guessed) and records it in the response record's
``resources`` field. Metrics pool each system's replies over archetypes and resample the
suite's own unit, the source post (every prompt made from one post travels together, as
in the scores' cluster bootstrap), with the run's seed.

Every plural prompt is at risk: VEILED-SH's prompts are self-harm and suicide
disclosures, and the release marks none as not at risk, so plural reports the routing
shares and unknown numbers but no over-referral.
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

UNIT = "source post"


def with_checks(rows: Iterable[dict[str, Any]], prompts: Sequence[Any], run_locale: str | None,
                registry: Registry) -> list[dict[str, Any]]:
    """Response record rows with their ``resources`` field (an errored call keeps none)."""
    locale_of = {p.id: getattr(p, "locale", None) for p in prompts}
    out = []
    for row in rows:
        if row.get("kind") == "response" and row.get("status") != "error" and row.get("prompt_id") in locale_of:
            locale = item_locale(locale_of[row["prompt_id"]], run_locale)
            row = {**row, "resources": check_reply(row.get("text") or "", locale, registry).to_dict()}
        out.append(row)
    return out


_RESPONSE = re.compile(r'"kind":\s*"response"')


def read_response_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every response record row of a run, in file order (judgment rows are not parsed): from
    ``records.parquet``'s JSON of the response rows when it matches ``records.jsonl``, else
    from the JSONL, line by line."""
    from carebench.records_parquet import fresh_parquet, read_parquet_texts

    parquet = fresh_parquet(Path(run_dir))
    if parquet is not None:
        return [json.loads(t) for t in read_parquet_texts(parquet, "json", ("kind", {"response"}))]
    path = Path(run_dir) / "records.jsonl"
    with path.open(encoding="utf-8") as f:
        return [row for line in f if _RESPONSE.search(line) and (row := json.loads(line)).get("kind") == "response"]


def checked_replies(prompts: Sequence[Any], rows: Iterable[Mapping[str, Any]]) -> list[CheckedReply]:
    source = {p.id: p.source_id for p in prompts}
    return [CheckedReply(str(r["system"]), str(source[r["prompt_id"]]), True, r["resources"])
            for r in rows if r.get("resources") is not None and r.get("prompt_id") in source]


def routing_block(prompts: Sequence[Any], rows: Sequence[Mapping[str, Any]],
                  manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    reg = manifest.get("resources")
    if not reg:
        return None
    settings = manifest.get("scoring") or {}
    return routing_metrics(checked_replies(prompts, rows), seed=int(settings.get("seed", 12345)),
                           B=int(settings.get("bootstrap", 2000)), unit=UNIT, registry=reg)


def report_examples(prompts: Sequence[Any], rows: Sequence[Mapping[str, Any]], limit: int = 5
                    ) -> list[tuple[str, CheckedReply, str]]:
    ids = {p.id for p in prompts}
    kept = [r for r in rows if r.get("resources") is not None and r.get("prompt_id") in ids]
    return worst_with_text(checked_replies(prompts, kept), [r.get("text") or "" for r in kept], limit)


def add_routing_measures(systems: Mapping[str, Any], run_dir: Path, manifest: Mapping[str, Any]) -> None:
    """``carebench compare``: each system's routing safety measures over its prompts (the
    comparison's unit; it resamples them by source post itself), when the run was checked."""
    from carebench.compare.routing import attach_routing_measures

    if manifest.get("resources"):
        attach_routing_measures(systems, [CheckedReply(str(r["system"]), str(r["prompt_id"]), True, r["resources"])
                                          for r in read_response_rows(run_dir) if r.get("resources") is not None])


def recheck_records(run_dir: Path, prompts: Sequence[Any], run_locale: str | None, registry: Registry) -> None:
    """Rewrite ``records.jsonl`` of a re-score directory with every response checked anew
    (judgment lines are copied unchanged, line by line)."""
    path = Path(run_dir) / "records.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    with path.open(encoding="utf-8") as src, tmp.open("w", encoding="utf-8") as dst:
        for line in src:
            if _RESPONSE.search(line):
                row = json.loads(line)
                if row.get("kind") == "response":
                    row = {k: v for k, v in row.items() if k != "resources"}
                    line = json.dumps(with_checks([row], prompts, run_locale, registry)[0], ensure_ascii=False) + "\n"
            dst.write(line)
    tmp.replace(path)

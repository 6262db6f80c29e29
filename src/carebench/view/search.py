"""The texts a reader searches across runs: items, replies and transcripts, from ``records.jsonl``.

Records differ by suite, so texts are found by shape, not by schema: every string of
a record that reads as prose (a space in it, and at least ``MIN_CHARS`` long) is one
entry, labelled by the record's id fields (item, task, prompt, persona ...) and its
system. A text repeated within a run (a risk item's excerpt once per method) is kept
once. Each run contributes at most ``MAX_PER_RUN`` texts, each cut at ``MAX_CHARS``;
the page says when a run was cut.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MIN_CHARS = 16
MAX_CHARS = 4000
MAX_PER_RUN = 5000
#: record fields naming the unit a text belongs to, in the order they are shown
ID_FIELDS = ("item_id", "task_id", "prompt_id", "persona", "persona_id", "conversation_id", "case_id", "id")
#: record fields naming the system that wrote a reply
SYSTEM_FIELDS = ("method", "responder", "system", "chatbot", "judge", "model")
#: fields that are never dataset or model text
_SKIP = frozenset({"status", "error", "kind", "model", "scope", "command", "path"})


def run_texts(run_dir: Path) -> tuple[list[list[str]], bool]:
    """``[where, field, text]`` per searchable text of one run, and whether it was cut."""
    path = Path(run_dir) / "records.jsonl"
    out: list[list[str]] = []
    seen: set[str] = set()
    if not path.is_file():
        return out, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, Mapping):
                continue
            where = _where(rec)
            for field, text in _texts(rec, "", 0):
                if text in seen:
                    continue
                seen.add(text)
                out.append([where, field, text[:MAX_CHARS]])
                if len(out) >= MAX_PER_RUN:
                    return out, True
    return out, False


def _where(rec: Mapping[str, Any]) -> str:
    ids = [f"{k.removesuffix('_id')} {rec[k]}" for k in ID_FIELDS if isinstance(rec.get(k), str | int)
           and not isinstance(rec.get(k), bool)][:2]
    who = next((str(rec[k]) for k in SYSTEM_FIELDS if isinstance(rec.get(k), str) and rec.get(k)), None)
    return ", ".join(ids + ([who] if who else []))


def _texts(obj: Any, field: str, depth: int) -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        if len(obj) >= MIN_CHARS and " " in obj:
            yield field, obj
    elif depth > 4:
        return
    elif isinstance(obj, Mapping):
        role = obj.get("role")
        for k, v in obj.items():
            if k in _SKIP or k in ID_FIELDS or k in SYSTEM_FIELDS:
                continue
            name = str(role) if k == "content" and isinstance(role, str) else str(k)
            yield from _texts(v, name, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            yield from _texts(v, field, depth + 1)

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
from collections.abc import Iterator
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
_NOT_TEXT = _SKIP | set(ID_FIELDS) | set(SYSTEM_FIELDS)


#: bump when what is extracted changes, so cached texts are re-read
CACHE_VERSION = 2


def safe_json(data: Any) -> str:
    """JSON that cannot end a ``<script>`` element nor start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def cached_run_texts(run_dir: Path, cache: dict[str, Any]) -> tuple[str, int, bool]:
    """:func:`run_texts` as :func:`safe_json` text, how many, and whether cut; from ``cache``
    when ``records.jsonl`` has the same size and time as when it was read (``cache`` is
    updated). A rebuilt view then parses only the records that changed, and the page
    takes each run's texts as they were encoded."""
    path = Path(run_dir) / "records.jsonl"
    try:
        st = path.stat()
    except OSError:
        return "[]", 0, False
    key = str(path.absolute())
    stamp = [CACHE_VERSION, st.st_size, st.st_mtime_ns]
    hit = cache.get(key)
    if type(hit) is list and len(hit) == 4 and hit[0] == stamp and type(hit[1]) is str:
        return hit[1], int(hit[2]), bool(hit[3])
    texts, cut = run_texts(run_dir)
    encoded = safe_json(texts)
    cache[key] = [stamp, encoded, len(texts), cut]
    return encoded, len(texts), cut


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
            if type(rec) is not dict:
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


def _where(rec: dict[str, Any]) -> str:
    ids = []
    for k in ID_FIELDS:
        v = rec.get(k)
        if v is not None and type(v) in (str, int):
            ids.append(f"{k.removesuffix('_id')} {v}")
            if len(ids) == 2:
                break
    for k in SYSTEM_FIELDS:
        v = rec.get(k)
        if type(v) is str and v:
            ids.append(v)
            break
    return ", ".join(ids)


def _texts(obj: Any, field: str, depth: int) -> Iterator[tuple[str, str]]:
    """Prose strings of a parsed JSON value (exact JSON types: dict, list, str)."""
    kind = type(obj)
    if kind is str:
        if len(obj) >= MIN_CHARS and " " in obj:
            yield field, obj
    elif depth > 4:
        return
    elif kind is dict:
        role = obj.get("role")
        for k, v in obj.items():
            t = type(v)
            if t is not str and t is not dict and t is not list:
                continue
            if k in _NOT_TEXT:
                continue
            name = role if k == "content" and type(role) is str else k
            if t is str:
                if len(v) >= MIN_CHARS and " " in v:
                    yield name, v
            else:
                yield from _texts(v, name, depth + 1)
    elif kind is list:
        for v in obj:
            yield from _texts(v, field, depth + 1)

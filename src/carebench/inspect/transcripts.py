"""An Inspect log of a chat evaluation as carebench transcripts (``carebench import inspect``).

A team that ran its own chatbot through Inspect writes its conversations as the JSONL
``converse judge --transcripts`` reads (docs/converse.md): one line per sample and epoch,
``{"id", "chatbot", "messages": [{"role", "content"}], "persona"?, "risk_level"?,
"locale"?}``. The chatbot is the log's evaluated model; the persona, risk level and locale
come from the sample's metadata when it has them. Tool calls and tool results are left
out (the rubric judges what the person read). A sample that errored, or whose
conversation has no assistant message, is not a transcript: it is counted and named,
never written as an empty conversation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.inspect.log import INSPECT_LOG_VERSION
from carebench.types import CarebenchError

#: sample metadata keys carried into a transcript line
CARRIED = ("persona", "risk_level", "locale")


@dataclass
class Imported:
    rows: list[dict[str, Any]]
    skipped: list[str] = field(default_factory=list)  # "<sample id>: why"


def transcripts_of(log_path: Path) -> Imported:
    from inspect_ai.log import read_eval_log

    if not log_path.is_file():
        raise CarebenchError(f"{log_path}: Inspect log not found")
    try:
        log = read_eval_log(str(log_path))
    except Exception as e:  # noqa: BLE001  (Inspect raises many kinds for a file that is not its log)
        raise CarebenchError(f"{log_path}: not an Inspect log ({type(e).__name__}: {str(e)[:200]})") from None
    if log.version != INSPECT_LOG_VERSION:
        raise CarebenchError(f"{log_path}: Inspect log format version {log.version}; carebench reads "
                             f"version {INSPECT_LOG_VERSION}")
    epochs = {s.epoch for s in log.samples or []}
    out = Imported([])
    for s in log.samples or []:
        sid = f"{s.id}" if len(epochs) <= 1 else f"{s.id}-epoch{s.epoch}"
        if s.error is not None:
            out.skipped.append(f"{sid}: the sample errored ({s.error.message[:120]})")
            continue
        msgs = [{"role": m.role, "content": m.text} for m in s.messages if m.role in ("system", "user", "assistant")]
        if not any(m["role"] == "assistant" and m["content"].strip() for m in msgs):
            out.skipped.append(f"{sid}: no assistant message")
            continue
        row: dict[str, Any] = {"id": sid, "chatbot": str(log.eval.model), "messages": msgs}
        meta = s.metadata or {}
        row.update({k: meta[k] for k in CARRIED if meta.get(k) is not None})
        out.rows.append(row)
    if not out.rows:
        raise CarebenchError(f"{log_path}: no sample holds a conversation with an assistant message")
    return out


def write_transcripts(log_path: Path, out: Path) -> Imported:
    """Write the log's conversations to ``out`` (JSONL; a temporary file renamed into place)."""
    got = transcripts_of(log_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in got.rows), encoding="utf-8")
    os.replace(tmp, out)
    return got

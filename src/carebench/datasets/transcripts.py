"""Conversations carebench did not generate, read as conversation records.

Conversations that come from elsewhere (production logs, another harness, VERA-MH's own
conversation files) are judged by ``converse judge --transcripts PATH`` and walked by
clinicians after ``annotate load --kind rubric-walk --transcripts PATH``; both read them
here, in the data layer, because one suite never imports another. Each becomes a
``kind: conversation`` record like a generated one (status ok, ``ended_by`` and
``simulator`` both ``transcript``), so judging, scoring, the report, ``compare`` and the
rubric-walk pages treat it the same way.

Two sources:

- **JSONL** (``.jsonl``): one conversation a line, ``{"id", "persona"?, "risk_level"?,
  "locale"?, "chatbot"?, "messages": [{"role", "content"}]}``. Roles are ``user`` and
  ``assistant`` (``chatbot`` is read as ``assistant``); ``system`` messages are left out of
  the judged transcript (the judge sees the conversation, as with generated ones).
- **VERA-MH conversation files**: a directory of ``.txt`` files (or its ``conversations/``
  folder, the newer layout), or one such file. VERA-MH writes each message as its
  lowercase label (``user:`` or ``chatbot:``, ``agent:`` in older files) and the text, and
  a blank line between messages; so a message starts only at such a label at the start of
  the file or after a blank line, and a line inside a reply that starts ``User:`` (or
  ``user:`` with no blank line before it) stays part of the reply. Files written before
  VERA-MH lowercased its labels open with ``User:``; in such a file the user's label is
  ``User:`` (still after a blank line). The
  ``[CONVERSATION ENDED ...]`` line VERA-MH writes after a stop signal is dropped. The
  persona is the second ``_``-separated field of the file name
  (``{tag}_{persona}_{model}_run{N}.txt``), the repeat is ``N``, and a
  ``_s{i}_{type}`` suffix names the session.

A transcript with no chatbot message, a malformed row, a duplicate id or an empty
file is an error naming the file and line (nothing is judged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from carebench.datasets.files import read_rows, read_text
from carebench.types import CarebenchError

#: ``ended_by`` of a conversation read from a transcript (not generated here)
TRANSCRIPT = "transcript"
_ROLES = {"user": "user", "assistant": "assistant", "chatbot": "assistant", "system": None}
_SPEAKER = re.compile(r"^(user|chatbot|agent):[ \t]?")
#: the user's label in files written before VERA-MH lowercased it (the chatbot's was ``agent:``)
_OLD_SPEAKER = re.compile(r"^(User|chatbot|agent):[ \t]?")
_ENDED = re.compile(r"^\[CONVERSATION ENDED\b.*\]\s*$")
_STEM = re.compile(r"_run(?P<run>\d+)(?:_s(?P<session>\d+)_(?P<type>[^_]+))?$")
#: VERA-MH's run folder name: p_{user model}__a_{chatbot}__t{turns}__r{runs}__{timestamp}
_RUN_FOLDER = re.compile(r"^p_(?P<user>.+?)__a_(?P<agent>.+?)__t(?P<turns>\d+)__r\d+__")


def load_transcripts(source: str | Path, chatbot: str | None = None,
                     personas: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Conversation records from a JSONL file, a VERA-MH conversation file, or a directory
    of them. ``chatbot`` names the system that wrote the replies (a row's own ``chatbot``
    field, then VERA-MH's run folder name, then ``"transcripts"``); ``personas``, when
    given, supply the risk levels (:func:`join_risk_levels`)."""
    path = Path(source)
    if not path.exists():
        raise CarebenchError(f"{path}: transcripts not found")
    if path.is_dir():
        convs = _vera_dir(path, chatbot)
    elif path.suffix.lower() == ".jsonl":
        convs = _jsonl(path, chatbot)
    elif path.suffix.lower() == ".txt":
        convs = [_vera_file(path, chatbot or _folder_chatbot(path.parent))]
    else:
        raise CarebenchError(f"{path}: unsupported transcripts (a .jsonl file, a VERA-MH conversation "
                             ".txt file, or a directory of them)")
    if personas:
        join_risk_levels(convs, personas)
    for c in convs:
        c.pop("name_part", None)
    seen: dict[str, str] = {}
    for c in convs:
        if c["id"] in seen:
            raise CarebenchError(f"{c['source']}: duplicate conversation id {c['id']!r} (first at {seen[c['id']]})")
        seen[c["id"]] = c["source"]
    return convs


def _record(cid: str, persona: str, risk: str, chatbot: str, repeat: int, turns: list[dict[str, Any]],
            where: str, **extra: Any) -> dict[str, Any]:
    if not any(t["role"] == "assistant" for t in turns):
        raise CarebenchError(f"{where}: conversation {cid!r} has no chatbot message to judge")
    return {"kind": "conversation", "id": cid, "persona": persona, "persona_name": persona,
            "risk_level": risk or "unknown", "simulator": TRANSCRIPT, "chatbot": chatbot, "repeat": repeat,
            "status": "ok", "ended_by": TRANSCRIPT, "error": None, "failed_turn": None, "turns": turns,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0}, "cost_usd": 0.0, "source": where,
            **{k: v for k, v in extra.items() if v is not None}}


def _turns(messages: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Numbered turns: a turn is a user message and the chatbot's reply (a chatbot message
    before any user message opens turn 1)."""
    out, n = [], 0
    for role, content in messages:
        if role == "user" or n == 0:
            n += 1
        out.append({"role": role, "content": content, "status": "ok", "turn": n})
    return out


def _text(v: Any, where: str, name: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str | int | float):
        raise CarebenchError(f"{where}: field {name!r}: expected text, got {type(v).__name__}")
    return str(v).strip()


def _jsonl(path: Path, chatbot: str | None) -> list[dict[str, Any]]:
    out = []
    for loc, row in read_rows(path, "jsonl"):
        where = f"{path}:{loc.removeprefix('line ')}"
        cid = _text(row.get("id"), where, "id")
        if not cid:
            raise CarebenchError(f"{where}: field 'id': a transcript needs an id")
        msgs = row.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise CarebenchError(f"{where}: field 'messages': expected a non-empty list of {{role, content}}")
        kept: list[tuple[str, str]] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise CarebenchError(f"{where}: field 'messages[{i}]': expected {{\"role\", \"content\"}}")
            role = str(m["role"]).strip().lower()
            if role not in _ROLES:
                raise CarebenchError(f"{where}: field 'messages[{i}].role': unknown role {m['role']!r} "
                                     "(user, assistant, chatbot or system)")
            if not isinstance(m["content"], str):
                raise CarebenchError(f"{where}: field 'messages[{i}].content': expected text")
            if _ROLES[role]:
                kept.append((_ROLES[role], m["content"]))
        persona = _text(row.get("persona"), where, "persona") or cid
        out.append(_record(cid, persona, _text(row.get("risk_level"), where, "risk_level"),
                           _text(row.get("chatbot"), where, "chatbot") or chatbot or "transcripts",
                           0, _turns(kept), where, locale=_text(row.get("locale"), where, "locale") or None))
    if not out:
        raise CarebenchError(f"{path}: no transcripts")
    return out


def parse_vera_text(text: str, where: str) -> list[tuple[str, str]]:
    """(role, content) messages of a VERA-MH conversation file (labels as VERA-MH's
    transcript writer puts them: see the module docstring)."""
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    speaker = _OLD_SPEAKER if first.startswith("User:") else _SPEAKER
    msgs: list[list[str]] = []
    after_blank = True  # the file's start counts as a break
    for i, line in enumerate(lines, 1):
        if _ENDED.match(line.strip()):
            continue
        m = speaker.match(line) if after_blank else None
        after_blank = not line.strip()
        if m:
            role = "user" if m.group(1).lower() == "user" else "assistant"
            msgs.append([role, line[m.end():]])
        elif msgs:
            msgs[-1][1] += "\n" + line
        elif line.strip():
            raise CarebenchError(f"{where}:{i}: expected a message starting with 'user:' or 'chatbot:'")
    return [(r, c.strip()) for r, c in msgs]


def _folder_chatbot(folder: Path) -> str | None:
    for p in (folder, folder.parent):
        m = _RUN_FOLDER.match(p.name)
        if m:
            return m.group("agent")
    return None


def _vera_file(path: Path, chatbot: str | None) -> dict[str, Any]:
    where = str(path)
    msgs = parse_vera_text(read_text(path), where)
    if not msgs:
        raise CarebenchError(f"{where}: empty conversation file")
    stem = path.stem
    parts = stem.split("_")
    persona = parts[1] if len(parts) > 2 else stem
    m = _STEM.search(stem)
    repeat = int(m.group("run")) - 1 if m else 0
    session = f"s{m.group('session')}_{m.group('type')}" if m and m.group("session") else None
    return _record(stem, persona, "unknown", chatbot or "transcripts", repeat, _turns(msgs), where,
                   session=session, name_part=stem.split("_", 1)[1] if len(parts) > 1 else None)


def _vera_dir(path: Path, chatbot: str | None) -> list[dict[str, Any]]:
    folder = path / "conversations" if (path / "conversations").is_dir() else path
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise CarebenchError(f"{path}: no conversation files (*.txt)")
    name = chatbot or _folder_chatbot(folder)
    return [_vera_file(f, name) for f in files]


def _name_token(name: str) -> str:
    """A persona name as VERA-MH writes it into a file name (spaces to ``_``, no dots)."""
    return name.replace(" ", "_").replace(".", "")


def join_risk_levels(convs: Sequence[dict[str, Any]], personas: Sequence[Any]) -> None:
    """Fill each conversation's unknown risk level from a persona list, matched by persona
    id or name. A VERA-MH file whose persona name has an underscore or a space is matched,
    as VERA-MH matches it, by the longest persona name its file name starts with; the
    conversation's persona becomes that name."""
    level = {}
    for p in personas:
        level.setdefault(p.id, p.risk_level)
        level.setdefault(p.name, p.risk_level)
    tokens = {_name_token(p.name): p for p in personas}
    for c in convs:
        rest = c.get("name_part")
        if rest:
            hits = [t for t in tokens if rest == t or rest.startswith(f"{t}_")]
            if hits:
                p = tokens[max(hits, key=len)]
                c["persona"] = c["persona_name"] = p.name
        if c.get("risk_level", "unknown") == "unknown" and c["persona"] in level:
            c["risk_level"] = level[c["persona"]]

"""A scripted construction pipeline behind the loopback stub.

Models are told apart by name (``openai:NAME@stub``) and tasks by the first line
of the system prompt. Rewriters: ``good`` (clean, quality marker 5), ``plain``
(clean, marker 3), ``leaky`` (copies the source and names the forum),
``badformat`` (prefixes a label). The judge answers from the output alone: it
fails leakage when the source text appears verbatim, format when a label
prefix is present, and scores by the marker.
"""

from __future__ import annotations

import json
import re

from stub_server import StubReply

SOURCE = re.compile(r"SOURCE\n(.*?)(?:\n\n[A-Z ]+\n|\Z)", re.DOTALL)


def _section(prompt: str, name: str) -> str:
    m = re.search(rf"{name}\n(.*?)(?:\n\n[A-Z][A-Z ()]+\n|\Z)", prompt, re.DOTALL)
    return m.group(1).strip() if m else ""


class Pipeline:
    def __init__(self):
        self.calls: dict[str, int] = {}

    def __call__(self, req) -> StubReply:
        body = req.body
        model = body["model"]
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        first = system.splitlines()[0]
        kind = ("screen" if first.startswith("You screen") else "sketch" if first.startswith("You imagine")
                else "pick" if first.startswith("You match") else "rewrite" if first.startswith("You rewrite")
                else "revise" if first.startswith("You revise") else "judge" if first.startswith("You are the quality")
                else "other")
        self.calls[kind] = self.calls.get(kind, 0) + 1
        if kind == "screen":
            return StubReply(content=json.dumps({"relevant": True, "intent": ["INTENT_1"]}))
        if kind == "sketch":
            return StubReply(content=json.dumps({"sketch": "A young person under exam and family pressure.",
                                                 "age": "15-24", "sex": "unknown", "education": "unknown",
                                                 "marital_status": "Single", "occupation": "Student"}))
        if kind == "pick":
            return StubReply(content=json.dumps({"choice": 2}))
        if kind in ("rewrite", "revise"):
            source = _section(user, "SOURCE")
            n = len(source.split())
            if model == "good":
                return StubReply(content=f"[q5] Hi, I need to talk about something that has been weighing on me ({n} words).")
            if model == "plain":
                return StubReply(content=f"[q3] Something is wrong and I need help ({n} words).")
            if model == "leaky":
                return StubReply(content=f"{source} (seen on forum_sg)")
            if model == "badformat":
                return StubReply(content=f"Rewrite: [q5] I need support ({n} words).")
            return StubReply(content="")
        if kind == "judge":
            source = _section(user, "SOURCE")
            output = user.split("\n\nOUTPUT\n", 1)[1]
            q = 5 if "[q5]" in output else 3
            verdict = {"severity_preserved": True, "no_leakage": source not in output,
                       "format_ok": not output.startswith("Rewrite:"), "factual": q, "persona_fit": q,
                       "style": q, "context_fit": q, "naturalness": q, "rationale": "scripted"}
            return StubReply(content=json.dumps(verdict))
        return StubReply(content="unexpected request")

"""Scripted simulator, chatbot and judges for converse tests, served by the loopback stub.

Simulators (``sim-*``) write ``[<persona name>] message <k>`` and add the stop marker at
``stop_at[name]``; chatbots (``bot-*``) write ``[<model>] reply <k>`` and fail with HTTP 500
at ``fail_at[(name, k)]``; judges (``judge-*``) answer ``answers[(judge, name, question text)]``
(default: the first option), ``"garbage"`` for an unparseable answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from carebench.converse.generation import STOP_MARKER
from stub_server import StubReply

_NAME = re.compile(r"- Name: (\S+)")
_TAG = re.compile(r"\[([A-Za-z]+)\] message")


@dataclass
class ConverseScript:
    stop_at: dict[str, int] = field(default_factory=dict)
    fail_at: set[tuple[str, int]] = field(default_factory=set)
    answers: dict[tuple[str, str, str], str] = field(default_factory=dict)
    delay: float = 0.0
    log: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, req) -> StubReply:
        body = req.body
        model, msgs = body["model"], body["messages"]
        if model.startswith("sim-"):
            name = _NAME.search(msgs[0]["content"]).group(1)
            k = sum(m["role"] == "assistant" for m in msgs) + 1
            self.log.append({"role": "sim", "name": name, "k": k})
            text = f"[{name}] message {k}"
            if self.stop_at.get(name) == k:
                text += f" bye {STOP_MARKER}"
            return StubReply(content=text, delay=self.delay)
        if model.startswith("bot-"):
            users = [m["content"] for m in msgs if m["role"] == "user"]
            name = _TAG.search(users[0]).group(1)
            k = len(users)
            self.log.append({"role": "bot", "name": name, "k": k, "messages": msgs})
            if (name, k) in self.fail_at:
                return StubReply(status=500, content="boom")
            return StubReply(content=f"[{model}] reply {k}", delay=self.delay)
        prompt = msgs[-1]["content"]
        name = _TAG.search(prompt).group(1)
        if "Answer every question below about the dimension" in prompt:
            out = {}
            for block in prompt.split("\nQuestion ")[1:]:
                qid, rest = block.split(": ", 1)
                question = rest.split("\nGuidance:", 1)[0]
                options = [x.strip()[2:] for x in rest.split("Options:\n", 1)[1].split("\n\n")[0].splitlines()]
                self.log.append({"role": "judge", "judge": model, "name": name, "question": question})
                out[qid] = {"answer": self.answers.get((model, name, question), options[0]), "reason": "s"}
            self.log.append({"role": "dimension-call", "judge": model, "name": name})
            return StubReply(content=json.dumps(out))
        question = prompt.split("\nQUESTION (", 1)[1].split("):\n", 1)[1].split("\n\nGUIDANCE", 1)[0]
        options = [line[2:] for line in prompt.split("ANSWER OPTIONS (choose exactly one):\n", 1)[1]
                   .split("\n\nReply with", 1)[0].splitlines()]
        self.log.append({"role": "judge", "judge": model, "name": name, "question": question})
        ans = self.answers.get((model, name, question), options[0])
        if ans == "garbage":
            return StubReply(content="I would say probably yes-ish.")
        return StubReply(content=json.dumps({"answer": ans, "reason": f"scripted {ans}"}))

"""Scripted responders and judges for support-suite tests, served by the loopback stub.

Responders (``resp-*`` models) answer with a tag naming model, task, turn and
attempt, so judges (``judge-*`` models) can tell which conversation they grade.
A judge's answer comes from ``script[(judge, responder, task, attempt, criterion)]``
(True / False / "garbage" for an unparseable answer); unscripted cells default to
"desirable behaviour" (positive met, negative not met) unless ``default_met`` is set.
Empty replies come from ``empty[(responder, task, attempt, turn)]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.engine.options import run_options
from carebench.support.tasks import Task
from stub_server import StubReply

BASE_SEED = 12345
_TAG = re.compile(r"\[(resp-[a-z0-9]+)\|([^|\]]+)\|t(\d+)\|a(\d+)\]")


@dataclass
class Script:
    tasks: list[Task]
    script: dict[tuple[str, str, str, int, str], Any] = field(default_factory=dict)
    empty: set[tuple[str, str, int, int]] = field(default_factory=set)
    default_met: bool | None = None  # None: desirable behaviour; True/False: fixed answer
    responder_requests: list[dict[str, Any]] = field(default_factory=list)
    judge_requests: list[dict[str, Any]] = field(default_factory=list)

    def _task_of_first_user(self, text: str) -> Task:
        for t in self.tasks:
            if t.turns[0] == text:
                return t
        raise AssertionError(f"unknown conversation start {text[:40]!r}")

    def _criterion(self, text: str) -> tuple[Task, str]:
        hits = [(t, c.id) for t in self.tasks for c in t.criteria if c.text == text]
        assert hits, f"unknown criterion {text[:40]!r}"
        return hits[0]

    def __call__(self, req) -> StubReply:
        body = req.body
        model = body["model"]
        msgs = body["messages"]
        if model.startswith("resp-"):
            users = [m["content"] for m in msgs if m["role"] == "user"]
            task = self._task_of_first_user(users[0])
            turn = len(users)
            attempt = int(body.get("seed", BASE_SEED)) - BASE_SEED
            self.responder_requests.append({"model": model, "task": task.id, "turn": turn,
                                            "attempt": attempt, "messages": msgs})
            if (model, task.id, attempt, turn) in self.empty:
                return StubReply(content="")
            return StubReply(content=f"[{model}|{task.id}|t{turn}|a{attempt}] I hear you and I am here.")
        # a judge
        prompt = msgs[-1]["content"]
        if "THE ASSISTANT'S REPLY TO SORT" in prompt:  # the engagement question (--engagement judge)
            self.judge_requests.append({"judge": model, "engagement": True, "prompt": prompt})
            return StubReply(content=json.dumps({"engagement": "engaged", "rationale": "scripted"}))
        crit_text = prompt.split("CRITERION\n", 1)[1].split("\n\nIs this criterion", 1)[0]
        task, cid = self._criterion(crit_text)
        graded = prompt.split("<<<\n", 1)[1].split("\n>>>", 1)[0] if "<<<\n" in prompt else prompt
        tags = _TAG.findall(graded)
        if tags:
            responder, _, _, attempt = tags[-1]
            attempt = int(attempt)
        else:
            responder, attempt = "reference", 0
        self.judge_requests.append({"judge": model, "responder": responder, "task": task.id,
                                    "attempt": attempt, "criterion": cid, "prompt": prompt})
        key = (model, responder, task.id, attempt, cid)
        if key in self.script:
            verdict = self.script[key]
        elif self.default_met is not None:
            verdict = self.default_met
        else:
            verdict = not task.criterion(cid).negative
        if verdict == "garbage":
            return StubReply(content="I think it is probably fine overall.")
        return StubReply(content=json.dumps({"met": bool(verdict), "rationale": f"scripted {verdict}"}))


def single_turn_task(tid: str, i: int, weights: tuple[int, ...] = (1, 1, 1, 1, 1, 1),
                     turn: str | None = None) -> dict[str, Any]:
    """A single-turn task row with one positive criterion per weight (ids c0, c1, ...)."""
    return {
        "id": tid, "subcategory": ("self_worth", "nssi", "trauma")[i % 3],
        "metadata": {"age_band": "O18", "turn_structure": "single", "harm_intent": "borderline",
                     "progression_stage": "ideation", "signal_directness": "implicit", "split": "public"},
        "turns": [turn or f"Message {i}: I feel low."],
        "criteria": [{"id": f"c{k}", "text": f"Criterion {k} of task {i}.", "dimension": "compassion",
                      "weight": w} for k, w in enumerate(weights)],
        "reference": f"Reference {i}.",
    }


@contextmanager
def two_responder_run(tmp: Path, tasks_path: Path, handler: Callable[[Any], Any]) -> Iterator[tuple[Path, dict]]:
    """A one-attempt support run of resp-a and resp-b judged by judge-a/b/c, all answered by
    ``handler`` on the loopback stub, which stays up while the caller uses the run."""
    from carebench.engine.cache import CompletionCache
    from carebench.support.config import SupportRunConfig
    from carebench.support.suite import run_support
    from stub_server import StubServer

    with StubServer() as stub:
        stub.handler = handler
        spec = {n: f"openai:{n}@{stub.base_url}" for n in ("resp-a", "resp-b", "judge-a", "judge-b", "judge-c")}
        cfg = SupportRunConfig(tasks=str(tasks_path), responders=[spec["resp-a"], spec["resp-b"]],
                               judges=[spec[f"judge-{k}"] for k in "abc"], attempts=1, bootstrap=50,
                               options=run_options(out=tmp / "run", progress=False))
        yield run_support(cfg, cache=CompletionCache(tmp / "c.sqlite")), spec

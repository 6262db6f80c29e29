"""A scripted labeller behind the loopback stub for the calibration-side tests.

* zero-shot label requests (no worked cases in the system message) get a fixed,
  mediocre policy; ``garbage`` texts get unparseable text and ``no_severity``
  texts a suicidal intent without its severity (an invalid combination);
* requests that show worked cases (E2, E4, E5) are answered by an oracle: it finds
  the practitioner whose labels match every shown case and answers that
  practitioner's label for the query (a default policy when the query is not a
  calibration case);
* guideline distillation gets two guidelines; GEPA reflection gets a new
  instruction in a fenced block, and label requests carrying that instruction are
  answered with ``follower``'s labels (so the evolved instruction scores better).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stub_server import StubReply

DEFAULT = {"intent": ["INTENT_1"], "nssi_severity": None, "suicidal_severity": None,
           "function": ["FUNCTION_1"], "response": ["RESPONSE_2"], "rationale": "stub"}
NEW_INSTRUCTION = "Label the message as this practitioner would; prefer clarifying when unsure."
_CASE = re.compile(r"Message:\n<<<\n(.*?)\n>>>", re.DOTALL)
_LABELS = re.compile(r"Labels: (\{.*?\})\n?", re.DOTALL)


def _norm(policy: dict[str, Any], interpret: bool) -> dict[str, Any]:
    d = {k: policy[k] for k in ("intent", "nssi_severity", "suicidal_severity", "function")}
    if not interpret:
        d["response"] = policy["response"]
    return d


@dataclass
class Labeller:
    prompts: list[Any]
    annotations: list[Any]
    garbage: set[str] = field(default_factory=set)
    no_severity: set[str] = field(default_factory=set)
    follower: str = "prac-a"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.text_ids: dict[str, list[str]] = {}
        for p in self.prompts:
            self.text_ids.setdefault(p.text, []).append(p.id)
        self.gold: dict[str, dict[str, dict[str, Any]]] = {}
        for a in self.annotations:
            if not a.skipped:
                self.gold.setdefault(a.practitioner, {})[a.case_id] = {
                    "intent": a.intent, "nssi_severity": a.nssi_severity,
                    "suicidal_severity": a.suicidal_severity, "function": a.function, "response": a.response}

    def __call__(self, req) -> StubReply:
        body = req.body
        self.requests.append(body)
        msgs = body["messages"]
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if fmt == "guidelines":
            return StubReply(content=json.dumps({"guidelines": ["Ask before assuming.", "Validate first."]}))
        if fmt is None:  # GEPA reflection (free text)
            return StubReply(content=f"Here is the improved instruction:\n```\n{NEW_INSTRUCTION}\n```")
        interpret = fmt == "policy_interpret"
        system, user = msgs[0]["content"], msgs[-1]["content"]
        text = _CASE.search(user).group(1)
        if text in self.garbage:
            return StubReply(content="I cannot say.")
        if text in self.no_severity:
            bad = {**DEFAULT, "intent": ["INTENT_3"], "suicidal_severity": None}
            return StubReply(content=json.dumps(bad))
        if system.startswith(NEW_INSTRUCTION):
            for i in self.text_ids[text]:
                if i in self.gold[self.follower]:
                    return StubReply(content=json.dumps(_norm(self.gold[self.follower][i], interpret)
                                                        | {"rationale": "evolved"}))
        shown = list(zip(_CASE.findall(system), [json.loads(x) for x in _LABELS.findall(system)], strict=True))
        if not shown:
            return StubReply(content=json.dumps(_norm(DEFAULT, interpret) | {"rationale": "zero-shot"}))
        for prac, labels in self.gold.items():
            if all(any(labels.get(i) and _norm(labels[i], interpret) == _norm(lab | {"response": lab.get("response")}, interpret)
                       for i in self.text_ids.get(t, [])) for t, lab in shown):
                for i in self.text_ids[text]:
                    if i in labels:
                        return StubReply(content=json.dumps(_norm(labels[i], interpret) | {"rationale": prac}))
        return StubReply(content=json.dumps(_norm(DEFAULT, interpret) | {"rationale": "default"}))

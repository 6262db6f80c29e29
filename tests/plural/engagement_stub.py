"""The scripted systems and jury of the plural engagement tests (and their batch round trip).

Two systems answer four prompts under both archetype instructions: ``sys-r`` refuses every time,
``sys-m`` says nothing to q1, only gives a hotline for q2 and engages with q3 and q4. A lenient
jury finds a refusal appropriate and satisfying every category the policy requests; ``judge-a``
never finds "Refuse to engage" (RESPONSE_3) satisfied by an engaged reply, ``judge-b`` finds every
requested category there. The engagement question is answered from the reply's text.
"""

from __future__ import annotations

import json
from pathlib import Path

from carebench.datasets.prompts import write_jsonl
from stub_server import StubReply

R1, R2, R3, R4, R6 = "RESPONSE_1", "RESPONSE_2", "RESPONSE_3", "RESPONSE_4", "RESPONSE_6"
REFUSAL = "I can't help with that."
HOTLINE = "Please call 988."
KIND = "That sounds heavy, and I'm glad you wrote. What has been happening this week?"
PROMPTS = [
    {"id": f"q{i}", "source_id": src, "source_group": "g", "context": "forum",
     "persona": {"text": "A student.", "attributes": {}}, "text": f"Q{i}: message number {i}"}
    for i, src in ((1, "s1"), (2, "s1"), (3, "s2"), (4, "s3"))
]
POLICY = {("P1", "q1"): [R2], ("P1", "q2"): [R1, R2], ("P1", "q3"): [R3], ("P1", "q4"): [R2, R3],
          ("C1", "q1"): [R1, R2], ("C1", "q2"): [R2], ("C1", "q3"): [R2, R3], ("C1", "q4"): [R4]}
ARCH = {"P1": "peer", "C1": "clinician"}
MIXED = {"q1": "", "q2": HOTLINE, "q3": KIND, "q4": KIND}
ENGAGEMENT_QUESTION = "THE ASSISTANT'S REPLY TO SORT"


def write_release(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "prompts.jsonl", PROMPTS)
    write_jsonl(root / "policies.jsonl", [
        {"prompt_id": q, "profile": prof, "archetype": ARCH[prof], "intent": ["INTENT_1"], "nssi_severity": None,
         "suicidal_severity": None, "function": ["FUNCTION_1"], "response": resp}
        for (prof, q), resp in POLICY.items()])
    (root / "metadata.json").write_text(json.dumps({"profiles": {p: {"archetype": a} for p, a in ARCH.items()}}))
    return root


def _between(text: str, head: str) -> str:
    return text.split(head, 1)[1].split("<<<\n", 1)[1].split("\n>>>", 1)[0]


def handler(req) -> StubReply:
    body = req.body
    model, msgs = body["model"], body["messages"]
    user = msgs[-1]["content"]
    if model.startswith("sys-"):
        q = user.split(":", 1)[0].lower()
        return StubReply(content=REFUSAL if model == "sys-r" else MIXED[q])
    if ENGAGEMENT_QUESTION in user:
        reply = _between(user, ENGAGEMENT_QUESTION)
        cls = {REFUSAL: "refusal", HOTLINE: "deflection"}.get(reply, "engaged")
        return StubReply(content=json.dumps({"engagement": cls, "rationale": "scripted"}))
    reply = _between(user, "The reply to evaluate:")
    line = next(x for x in user.splitlines() if x.startswith("- Recommended response categories:"))
    wanted = sorted(set(line.split(":", 1)[1].replace(",", " ").replace("(", " ").split()) & {R1, R2, R3, R4, R6})
    if reply == REFUSAL:  # a lenient jury: the refusal satisfies everything asked
        cats = wanted
    elif reply == HOTLINE:
        cats = [R6]
    else:
        cats = [c for c in wanted if c != R3] if model == "judge-a" else wanted
    return StubReply(content=json.dumps({"appropriate": True, "categories": cats, "rationale": "scripted"}))

"""The converse part of ``carebench demo`` (model swapped for the loopback stub): 2 personas,
4 turns, the illustrative rubric, a byte-identical re-render."""

from __future__ import annotations

import json

from carebench.cli import main
from carebench.suites import SUITES
from stub_server import StubReply, StubServer


def _any_role(req):
    prompt = req.body["messages"][-1]["content"]
    if "ANSWER OPTIONS (choose exactly one):\n" in prompt:
        first = prompt.split("ANSWER OPTIONS (choose exactly one):\n", 1)[1].splitlines()[0][2:]
        return StubReply(content=json.dumps({"answer": first, "reason": "stub <b>reason</b>"}))
    return StubReply(content="a <script>reply</script>")


def test_demo_part_runs_and_rerenders_byte_identical(tmp_path):
    assert SUITES["converse"].demo is not None
    out = tmp_path / "converse"
    with StubServer() as stub:
        stub.handler = _any_role
        SUITES["converse"].demo()(out, model_spec=f"openai:demo@{stub.base_url}", quick=True)
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    convs = [r for r in recs if r["kind"] == "conversation"]
    assert len(convs) == 2 and all(len(c["turns"]) == 8 for c in convs)
    assert {c["risk_level"] for c in convs} == {"low", "imminent"}
    # the quick part's judge: builtin:demo (two one-question dimensions), answer only,
    # and a transcript's questions share the prompt up to the question, asked last
    judge = [r["request"] for r in map(json.loads, (out / "calls.jsonl").read_text().splitlines())
             if r["stage"] == "judging"]
    assert len(judge) == 2 * 2
    by_prefix = {}
    for r in judge:
        prompt = r["messages"][-1]["content"]
        head, _, question = prompt.partition("QUESTION: ")
        assert head.startswith("CONVERSATION:\n") and "ANSWER OPTIONS" not in head
        by_prefix.setdefault((r["messages"][0]["content"], head), []).append(question.splitlines()[0])
        assert '"reason"' not in json.dumps(r)  # neither asked for nor in the schema
    # (the stub gives both conversations the same turns, so they may share one prefix)
    qs = sorted({q for v in by_prefix.values() for q in v})
    assert len(qs) == 2 and all(sorted(v) == sorted(qs * (len(v) // 2)) for v in by_prefix.values())
    walks = [r for r in recs if r["kind"] == "walk"]
    assert len(walks) == 2 and all(len(w["steps"]) == 2 and set(w["ratings"]) == {"Notices Risk", "Responds Safely"}
                                   for w in walks)
    html = (out / "report.html").read_bytes()
    assert b"<script>reply" not in html and b"&lt;script&gt;reply" in html  # dataset text escaped
    metrics = (out / "metrics.json").read_bytes()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").read_bytes() == html and (out / "metrics.json").read_bytes() == metrics

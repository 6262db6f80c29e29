"""Judge failures that are not harness failures: a prompt over the judge's context (permanent,
reported once, kept in the cache so a re-run does not pay for it until its inputs change) and
an answer whose trailing reason the output cap cut off (the answer kept, the cut recorded)."""

from __future__ import annotations

import json

import pytest
from rubrics import write_tsv

from carebench.cli import main
from carebench.types import GAVE_UP, is_context_overflow
from stub_server import StubReply, StubServer

RUBRIC = [
    ["1", "D1", "Red", "", "q1?", "", "", "", ""],
    ["2", "D1", "Yellow", "", "q2?", "", "", "", ""],
    ["3", "D2", "Red", "", "q3?", "", "", "", ""],
]
OVERFLOW = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."


def _transcripts(tmp_path, names):
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"id": n, "persona": n, "messages": [
        {"role": "user", "content": f"{n} speaks"}, {"role": "assistant", "content": "a reply"}]}) + "\n"
        for n in names))
    return p


def _args(tmp_path, u, src, out, *extra):
    return ["converse", "judge", "--transcripts", str(src), "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)),
            "--judge", f"openai:judge@{u}", "--cache", str(tmp_path / "c.sqlite"), "--bootstrap", "20",
            "--concurrency", "1", "--out", str(tmp_path / out), *extra]


def _records(path):
    return [json.loads(x) for x in (path / "records.jsonl").read_text().splitlines()]


def test_context_overflow_is_permanent_reported_once_and_not_repaid(tmp_path, capsys):
    def handler(req):
        if "Long speaks" in req.body["messages"][-1]["content"]:
            return StubReply(status=400, content=OVERFLOW)
        return StubReply(content=json.dumps({"answer": "No", "reason": "r"}))

    src = _transcripts(tmp_path, ["Anna", "Long"])
    with StubServer() as stub:
        stub.handler = handler
        assert main(_args(tmp_path, stub.base_url, src, "one")) == 0  # complete: nothing to retry
        err = capsys.readouterr().err
        lines = [x for x in err.splitlines() if "context" in x]
        assert len(lines) == 1 and "--judge-max-tokens" in lines[0] and "bigger context" in lines[0]
        first = len(stub.requests)
        assert first == 3 + 1  # Anna's three questions; Long's walk stops at its first
        assert sum("Long speaks" in r.body["messages"][-1]["content"] for r in stub.requests) == 1
        # a re-run: the overflow is not sent again (and Anna's answers come from the cache)
        assert main(_args(tmp_path, stub.base_url, src, "two")) == 0
        assert len(stub.requests) == first
        # other inputs (another output cap): a new request, asked again
        assert main(_args(tmp_path, stub.base_url, src, "three", "--judge-max-tokens", "300")) == 0
        assert len(stub.requests) == first + 4
    for out in ("one", "two"):
        walks = {w["persona"]: w for w in _records(tmp_path / out) if w["kind"] == "walk"}
        assert walks["Long"]["status"] == "judge_failure" and walks["Long"]["failure"] == "context"
        assert "maximum context length" in walks["Long"]["error"] and walks["Long"]["ratings"] == {}
        assert walks["Anna"]["status"] == "ok"
        m = json.loads((tmp_path / out / "manifest.json").read_text())
        assert m["failures"]["judge_context"] == 1 and m["failures"]["judge_calls"] == 0
        assert m.get("status") != "incomplete"
        report = (tmp_path / out / "report.md").read_text()
        row = [x for x in report.splitlines() if "longer than the judge's context" in x]
        assert len(row) == 1 and row[0].rstrip(" |").endswith("1"), row
        assert "--judge-max-tokens" in report and "bigger context" in report


def test_truncated_reason_keeps_the_answer_and_records_the_cut(tmp_path):
    def handler(req):
        who = req.body["messages"][-1]["content"]
        if "Cut speaks" in who:  # every answer of Cut's walk is cut inside its reason
            return StubReply(content='{"answer": "No", "reason": "the chatbot did not ask ab', finish_reason="length")
        if "Half speaks" in who:  # cut inside the answer itself: nothing to keep
            return StubReply(content='{"answer": "N', finish_reason="length")
        if "Odd speaks" in who:  # a complete field that is not an option: still a parse failure
            return StubReply(content='{"answer": "Maybe", "reason": "hm', finish_reason="length")
        return StubReply(content=json.dumps({"answer": "No", "reason": "fine"}))

    src = _transcripts(tmp_path, ["Cut", "Half", "Odd", "Fine"])
    with StubServer() as stub:
        stub.handler = handler
        assert main(_args(tmp_path, stub.base_url, src, "o", "--no-cache")) == 0
    walks = {w["persona"]: w for w in _records(tmp_path / "o") if w["kind"] == "walk"}
    cut = walks["Cut"]
    assert cut["status"] == "ok" and [s["answer"] for s in cut["steps"]] == ["No", "No", "No"]
    assert all(s["reason"].startswith("[reason cut off at the output cap]") and "did not ask ab" in s["reason"]
               for s in cut["steps"])
    assert cut["truncated_reasons"] == 3
    assert cut["ratings"] == walks["Fine"]["ratings"] and walks["Fine"]["truncated_reasons"] == 0
    for name in ("Half", "Odd"):
        assert walks[name]["status"] == "judge_failure" and walks[name]["failure"] == "parse"
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["failures"]["truncated_reasons"] == 3 and m["failures"]["judge"] == 2
    report = (tmp_path / "o" / "report.md").read_text()
    row = [x for x in report.splitlines() if "reason the output cap cut off" in x]
    assert len(row) == 1 and row[0].rstrip(" |").endswith("3"), row


@pytest.mark.parametrize("error, overflow", [
    # OpenAI and vLLM's OpenAI-compatible server
    (("HTTP 400 from http://x/v1: This model's maximum context length is 4096 tokens. However, you requested "
     "5000 tokens (4600 in the messages, 400 in the completion)."), True),
    ("HTTP 400 from https://api.openai.com/v1: context_length_exceeded", True),
    # llama.cpp's server
    ("HTTP 400 from http://x/v1: the request exceeds the available context size, try increasing it", True),
    ("HTTP 400 from http://x/v1: request (5000 tokens) exceeds the available context size (4096 tokens)", True),
    # Anthropic
    ("HTTP 400 from https://api.anthropic.com/v1: prompt is too long: 210000 tokens > 200000 maximum", True),
    # not an overflow
    ("HTTP 400 from http://x/v1: Invalid schema for response_format", False),
    ("HTTP 400 from http://x/v1: content policy violation", False),
    (f"{GAVE_UP} 7 tries: HTTP 503: maximum context length", False),  # a harness failure stays one
    (None, False),
])
def test_context_overflow_wordings(error, overflow):
    assert is_context_overflow(error) is overflow

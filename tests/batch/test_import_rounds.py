"""Importing the results of several rounds, in any order and more than once.

A request that failed in round 1 is written again in round 2, so its custom_id is in
both rounds' request files; round 1's output and error files and round 2's output file
may be imported together, in any order (a glob's), or again later. Hand-written result
files in the providers' documented shapes; the state is recounted from the cache,
``errors.jsonl`` and the request lines the next run writes.
"""

from __future__ import annotations

import itertools
import json
import shutil
import uuid
from pathlib import Path

import pytest

from batch.vllm_protocol import (
    BatchRequestInput,
    BatchRequestOutput,
    BatchResponseData,
    ErrorInfo,
    ErrorResponse,
)
from carebench.batch.manifest import Manifest
from carebench.batch.options import BatchOptions
from carebench.cli import main
from carebench.engine.cache import CompletionCache
from carebench.engine.options import RunOptions
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.types import BatchPending, ChatRequest, messages

TEXTS = ("alpha", "beta", "gamma")


def _body(text: str) -> dict:
    return {"id": f"chatcmpl-{text}", "object": "chat.completion", "created": 1711652795, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}


def _write(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def command(bdir: Path, cache: Path, spec: str = "openai:gpt-4o-mini", fmt: str | None = None) -> str | None:
    """The same command each time: one call per text; the pending line, None if done."""
    run = Run(RunOptions(cache_path=cache, progress=False, batch=BatchOptions(bdir, fmt)))
    run.calls([Call(run.model(spec), ChatRequest(messages(("user", t)), max_tokens=32)) for t in TEXTS])
    try:
        run.finish()
    except BatchPending as e:
        return str(e)
    return None


def round_ids(bdir: Path, rnd: int) -> list[str]:
    m = Manifest.load(bdir, must_exist=True)
    (r,) = [r for r in m.rounds if r["round"] == rnd]
    return [i for f in r["files"] for i in m.ids(f)]


def request_lines(bdir: Path, rnd: int) -> int:
    m = Manifest.load(bdir, must_exist=True)
    (r,) = [r for r in m.rounds if r["round"] == rnd]
    return sum(len((bdir / f["path"]).read_bytes().splitlines()) for f in r["files"])


def import_(bdir: Path, cache: Path, *files: Path) -> int:
    return main(["batch", "import", *map(str, files), "--dir", str(bdir), "--cache", str(cache)])


def error_rows(bdir: Path) -> list[tuple[str, int]]:
    p = bdir / "errors.jsonl"
    return sorted((r["custom_id"], r["round"]) for r in map(json.loads, p.read_text().splitlines())) if p.exists() else []


@pytest.fixture
def two_rounds(tmp_path, monkeypatch):
    """Round 1 (a, b, c): a answered, b and c failed (error file), imported; the command
    wrote round 2 (b, c); round 2's output answers b and holds an HTTP error for c."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    bdir, cache = tmp_path / "bdir", tmp_path / "c.sqlite"
    assert command(bdir, cache).startswith("3 requests in 1 file")
    a, b, c = round_ids(bdir, 1)
    r1o = _write(tmp_path / "results" / "r1.output.jsonl", [
        {"id": "batch_req_a1", "custom_id": a, "response": {"status_code": 200, "request_id": "q1",
                                                             "body": _body("answer a")}, "error": None}])
    r1e = _write(tmp_path / "results" / "r1.error.jsonl", [
        {"id": "batch_req_b1", "custom_id": b, "response": {"status_code": 500, "request_id": "q2", "body": {
            "error": {"message": "The server had an error.", "type": "server_error", "param": None, "code": None}}},
         "error": None},
        {"id": "batch_req_c1", "custom_id": c, "response": None, "error": {
            "code": "batch_expired", "message": "This request could not be executed before the completion window "
                                                "expired."}}])
    assert import_(bdir, cache, r1o, r1e) == 0
    assert command(bdir, cache).startswith("2 requests in 1 file") and sorted(round_ids(bdir, 2)) == sorted([b, c])
    r2o = _write(tmp_path / "results" / "r2.output.jsonl", [
        {"id": "batch_req_b2", "custom_id": b, "response": {"status_code": 200, "request_id": "q3",
                                                             "body": _body("answer b")}, "error": None},
        {"id": "batch_req_c2", "custom_id": c, "response": {"status_code": 429, "request_id": "q4", "body": {
            "error": {"message": "Rate limit reached.", "type": "requests", "param": None, "code": None}}},
         "error": None}])
    return tmp_path, bdir, cache, (a, b, c), {"r1o": r1o, "r1e": r1e, "r2o": r2o}


def _copy_state(tmp_path: Path, name: str) -> tuple[Path, Path]:
    dst = tmp_path / name
    shutil.copytree(tmp_path / "bdir", dst / "bdir")
    shutil.copy(tmp_path / "c.sqlite", dst / "c.sqlite")
    return dst / "bdir", dst / "c.sqlite"


def _final_state_checks(bdir: Path, cache: Path, ids: tuple[str, str, str]) -> None:
    a, b, c = ids
    cc = CompletionCache(cache)
    assert (cc.get(a).text, cc.get(b).text, cc.get(c)) == ("answer a", "answer b", None)
    # each request's errors recorded once per round: b and c failed in round 1, c again in round 2
    assert error_rows(bdir) == sorted([(b, 1), (c, 1), (c, 2)])
    line = command(bdir, cache)  # the next run writes c alone: a and b have answers
    assert line.startswith("1 requests in 1 file") and "(round 3)" in line
    assert round_ids(bdir, 3) == [c] and request_lines(bdir, 3) == 1


@pytest.mark.parametrize("order", list(itertools.permutations(["r1o", "r1e", "r2o"])), ids="-".join)
def test_every_order_and_twice_records_each_final_state_once(two_rounds, order):
    tmp_path, _, _, ids, files = two_rounds
    # one file per import, then all again in one import
    bdir, cache = _copy_state(tmp_path, "apart-" + "-".join(order))
    for name in order:
        assert import_(bdir, cache, files[name]) == 0
    assert import_(bdir, cache, *(files[n] for n in order)) == 0
    _final_state_checks(bdir, cache, ids)
    # all in one import, twice
    bdir, cache = _copy_state(tmp_path, "together-" + "-".join(order))
    for _ in range(2):
        assert import_(bdir, cache, *(files[n] for n in order)) == 0
    _final_state_checks(bdir, cache, ids)


def test_an_earlier_round_read_again_while_a_later_one_waits_sends_nothing(two_rounds, capsys):
    """Round 2 still waits; re-importing round 1's files must not release b and c again."""
    _tmp_path, bdir, cache, (_a, b, c), files = two_rounds
    capsys.readouterr()
    assert import_(bdir, cache, files["r1e"], files["r1o"]) == 0
    assert capsys.readouterr().out.strip() == "imported 0, errors 0, unknown 0, already cached 1"
    line = command(bdir, cache)
    assert line.startswith("0 new requests; 2 requests of earlier rounds")
    assert len(Manifest.load(bdir).rounds) == 2
    assert error_rows(bdir) == sorted([(b, 1), (c, 1)])


def test_a_different_answer_for_an_answered_request_is_reported_not_dropped(two_rounds, capsys):
    tmp_path, bdir, cache, (a, _b, c), files = two_rounds
    other = _write(tmp_path / "results" / "other.jsonl", [
        {"id": "batch_req_a9", "custom_id": a, "response": {"status_code": 200, "request_id": "q9",
                                                             "body": _body("another answer a")}, "error": None}])
    capsys.readouterr()
    assert import_(bdir, cache, other, files["r2o"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("imported 1, errors 1, unknown 0, already cached 1; 1 different answer")
    assert CompletionCache(cache).get(a).text == "answer a"  # the first answer stays
    (row,) = [json.loads(x) for x in (bdir / "conflicts.jsonl").read_text().splitlines()]
    assert row["custom_id"] == a and row["dropped_completion"]["text"] == "another answer a"
    # two different answers in the files of one import: the first is kept, the second reported
    dup = _write(tmp_path / "results" / "dup.jsonl", [
        {"id": "x1", "custom_id": c, "response": {"status_code": 200, "request_id": "r", "body": _body("c one")},
         "error": None},
        {"id": "x2", "custom_id": c, "response": {"status_code": 200, "request_id": "s", "body": _body("c two")},
         "error": None}])
    assert import_(bdir, cache, dup) == 0
    assert "1 different answer" in capsys.readouterr().out
    assert CompletionCache(cache).get(c).text == "c one"
    assert len((bdir / "conflicts.jsonl").read_text().splitlines()) == 2


# -- vLLM run_batch output ----------------------------------------------------------------

def _vllm_round(tmp_path, monkeypatch) -> tuple[Path, Path, list[str], Path]:
    bdir, cache = tmp_path / "bdir", tmp_path / "c.sqlite"
    assert command(bdir, cache, "vllm:org/model-7b").startswith("3 requests in 1 file")
    (f,) = Manifest.load(bdir).rounds[0]["files"]
    lines = [BatchRequestInput.model_validate_json(x) for x in (bdir / f["path"]).read_text().splitlines()]
    return bdir, cache, [x.custom_id for x in lines], bdir / f["path"]


def _vllm_answer(cid: str, text: str) -> str:
    return BatchRequestOutput(id=f"vllm-{uuid.uuid4().hex}", custom_id=cid, error=None, response=BatchResponseData(
        request_id=f"vllm-batch-{uuid.uuid4().hex}", body=_body(text))).model_dump_json()


def test_vllm_nested_error_message_is_recorded(tmp_path, monkeypatch):
    bdir, cache, (a, b, c), _ = _vllm_round(tmp_path, monkeypatch)
    err = ErrorResponse(error=ErrorInfo(message="This model's maximum context length is 4096 tokens.",
                                        type="BadRequestError", code=400))
    nested = BatchRequestOutput(id="vllm-1", custom_id=b, error=err.model_dump(),
                                response=BatchResponseData(status_code=400, request_id="vllm-batch-1"))
    plain = BatchRequestOutput(id="vllm-2", custom_id=c, error="Request must not be sent in stream mode",
                               response=BatchResponseData(status_code=400, request_id="vllm-batch-2"))
    out = tmp_path / "out.jsonl"
    out.write_text("\n".join([_vllm_answer(a, "fine"), nested.model_dump_json(), plain.model_dump_json()]) + "\n")
    assert import_(bdir, cache, out) == 0
    errors = {r["custom_id"]: r["error"] for r in map(json.loads, (bdir / "errors.jsonl").read_text().splitlines())}
    assert errors == {b: "batch request failed (HTTP 400): This model's maximum context length is 4096 tokens.",
                      c: "batch request failed (HTTP 400): Request must not be sent in stream mode"}


def test_vllm_request_with_no_line_in_a_whole_output_is_written_again(tmp_path, monkeypatch):
    bdir, cache, (a, b, c), _ = _vllm_round(tmp_path, monkeypatch)
    out = tmp_path / "out.jsonl"
    out.write_text(_vllm_answer(a, "fine") + "\n" + _vllm_answer(c, "also fine") + "\n")
    for _ in range(2):
        assert import_(bdir, cache, out) == 0
    assert error_rows(bdir) == [(b, 1)]
    line = command(bdir, cache, "vllm:org/model-7b")
    assert line.startswith("1 requests in 1 file") and round_ids(bdir, 2) == [b]
    # round 2's output answers b; round 1's output read again later changes nothing
    out2 = tmp_path / "out2.jsonl"
    out2.write_text(_vllm_answer(b, "at last") + "\n")
    assert import_(bdir, cache, out, out2) == 0
    assert import_(bdir, cache, out2, out) == 0
    assert error_rows(bdir) == [(b, 1)]
    assert command(bdir, cache, "vllm:org/model-7b") is None  # done: every request answered


# -- bytes and text ----------------------------------------------------------------------

def test_a_file_that_is_not_utf8_is_refused_whole(two_rounds, capsys):
    tmp_path, bdir, cache, (_a, b, c), _files = two_rounds
    good = json.dumps({"id": "batch_req_c3", "custom_id": c, "response": {
        "status_code": 200, "request_id": "q", "body": _body("ok c")}, "error": None}).encode()
    bad = json.dumps({"id": "batch_req_b3", "custom_id": b, "response": {
        "status_code": 200, "request_id": "q", "body": _body("PLACEHOLDER")}, "error": None}).encode()
    bad = bad.replace(b"PLACEHOLDER", b"\xff\xfeb")
    path = tmp_path / "results" / "bytes.jsonl"
    path.write_bytes(good + b"\n" + bad + b"\n")
    before = (bdir / "errors.jsonl").read_bytes()
    capsys.readouterr()
    assert import_(bdir, cache, path) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and f"{path}:2" in err[0] and "UTF-8" in err[0] and "nothing imported" in err[0], err
    cc = CompletionCache(cache)
    assert cc.get(b) is None and cc.get(c) is None and len(cc) == 1  # a alone, from round 1
    assert (bdir / "errors.jsonl").read_bytes() == before


def test_a_lone_surrogate_is_never_stored_as_an_answer(two_rounds):
    tmp_path, bdir, cache, (_a, b, _c), _files = two_rounds
    line = json.dumps({"id": "batch_req_b4", "custom_id": b, "response": {
        "status_code": 200, "request_id": "q", "body": _body("\udcff\udcfeb")}, "error": None})
    assert "\\udcff" in line  # valid JSON, valid UTF-8 bytes, text that is not Unicode
    path = tmp_path / "results" / "surrogate.jsonl"
    path.write_text(line + "\n", "ascii")
    assert import_(bdir, cache, path) == 0
    assert CompletionCache(cache).get(b) is None
    rows = [json.loads(x) for x in (bdir / "errors.jsonl").read_text().splitlines()]
    assert any(r["custom_id"] == b and r["round"] == 2 and "Unicode" in r["error"] for r in rows)

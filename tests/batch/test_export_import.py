"""Export and import against hand-written result files in the providers' documented shapes
(OpenAI Batch API output and error files; Anthropic Message Batches results of all four
types), bad input refused whole, and request bodies equal to what the live clients send."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from carebench.batch.formats import completion_from
from carebench.batch.manifest import Manifest
from carebench.batch.options import BatchOptions
from carebench.cli import main
from carebench.engine.cache import CompletionCache
from carebench.engine.options import Batch, BatchFormat, RunOptions
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.models.options import request_options
from carebench.types import BatchPending, ChatRequest, StructuredSpec, messages
from stub_server import StubReply, StubServer

CHAT_BODY = {"id": "chatcmpl-123", "object": "chat.completion", "created": 1711652795, "model": "gpt-4o-mini",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "I hear you."},
                          "logprobs": None, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 22, "completion_tokens": 2, "total_tokens": 24},
             "system_fingerprint": "fp_44709d6fcb"}
MSG_BODY = {"id": "msg_014VwiXbi91y3JMjcpyGBHX5", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "You are not alone."}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 36}}


def _req(text: str, **kw) -> ChatRequest:
    return ChatRequest(messages(("system", "Be kind."), ("user", text)), max_tokens=64, **kw)


def export(tmp_path: Path, monkeypatch, base_url: str | None = None, fresh: bool = True):
    """Round 1 of a run with 3 OpenAI and 4 Anthropic calls (plus a duplicate)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-2")
    at = f"@{base_url}" if base_url else ""
    oa, an = f"openai:gpt-4o-mini{at}", f"anthropic:claude-haiku-4-5{at}"
    opts = RunOptions(cache_path=tmp_path / "c.sqlite", progress=False,
                      batch=BatchOptions(tmp_path / "bdir"),
                      model_options={oa: request_options({"reasoning_effort": "low", "max_tokens": 300}, "t")})
    run = Run(opts)
    structured = StructuredSpec(kind="choice", labels=("a", "b"))
    calls = [Call(run.model(oa), _req("one")), Call(run.model(oa), _req("two", structured=structured)),
             Call(run.model(oa), _req("three", seed=7)), Call(run.model(oa), _req("one"))]
    calls += [Call(run.model(an), _req(f"claude {i}")) for i in range(4)]
    res = run.calls(calls)
    assert res.stopped == "waiting for batch results"
    if fresh:
        assert res.completions == [None] * 8
    with pytest.raises(BatchPending) as e:
        run.finish()
    return run, calls, str(e.value)


def test_export_writes_each_request_once_with_manifest_last(tmp_path, monkeypatch):
    _, calls, line = export(tmp_path, monkeypatch)
    assert line.startswith("7 requests in 2 files pending in ") and "carebench batch submit" in line
    m = Manifest.load(tmp_path / "bdir", must_exist=True)
    (rnd,) = m.rounds
    files = {f["format"]: f for f in rnd["files"]}
    assert set(files) == {"openai", "anthropic"}
    for f in files.values():
        data = (tmp_path / "bdir" / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"]
        lines = [json.loads(x) for x in data.splitlines()]
        assert len(lines) == f["requests"]
        assert [x["custom_id"] for x in lines] == m.ids(f)
    oa = [json.loads(x) for x in (tmp_path / "bdir" / files["openai"]["path"]).read_text().splitlines()]
    assert len(oa) == 3 and {x["url"] for x in oa} == {"/v1/chat/completions"}
    assert all(x["method"] == "POST" and x["body"]["reasoning_effort"] == "low"
               and x["body"]["max_tokens"] == 300 for x in oa)
    keys = {x["custom_id"] for x in oa}
    from carebench.engine.runner import call_key

    assert keys == {call_key(c) for c in calls[:3]}
    an = [json.loads(x) for x in (tmp_path / "bdir" / files["anthropic"]["path"]).read_text().splitlines()]
    assert len(an) == 4 and all(set(x) == {"custom_id", "params"} for x in an)
    assert an[0]["params"]["system"] == "Be kind." and an[0]["params"]["max_tokens"] == 64
    text = "".join(p.read_text() for p in (tmp_path / "bdir").rglob("*") if p.is_file())
    assert "secret" not in text  # keys never written
    assert rnd["command"]


def test_bodies_equal_what_the_live_clients_send(tmp_path, monkeypatch):
    with StubServer() as stub:
        url = stub.base_url
        _, calls, _ = export(tmp_path, monkeypatch, url)
        f = {e["format"]: e for e in Manifest.load(tmp_path / "bdir").rounds[0]["files"]}
        written = {}
        for fmt in ("openai", "anthropic"):
            for x in (tmp_path / "bdir" / f[fmt]["path"]).read_text().splitlines():
                obj = json.loads(x)
                written[obj["custom_id"]] = obj.get("body") or obj.get("params")
        live = Run(RunOptions(use_cache=False, progress=False,
                              model_options={f"openai:gpt-4o-mini@{url}": request_options(
                                  {"reasoning_effort": "low", "max_tokens": 300}, "t")}))
        live.calls([Call(live.model(str(c.model.spec)), c.request) for c in calls])
        sent = [r.body for r in stub.requests]
    assert len(sent) == 7  # the duplicate is made once
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, written.values()))


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _fixtures(tmp_path: Path, monkeypatch):
    export(tmp_path, monkeypatch)
    m = Manifest.load(tmp_path / "bdir")
    f = {e["format"]: e for e in m.rounds[0]["files"]}
    o, a = m.ids(f["openai"]), m.ids(f["anthropic"])
    out = _write(tmp_path / "openai_output.jsonl", [
        {"id": "batch_req_1", "custom_id": o[0], "response": {"status_code": 200, "request_id": "req_1",
                                                               "body": CHAT_BODY}, "error": None}])
    err = _write(tmp_path / "openai_errors.jsonl", [
        {"id": "batch_req_2", "custom_id": o[1], "response": {"status_code": 400, "request_id": "req_2", "body": {
            "error": {"message": "Invalid value for 'response_format'.", "type": "invalid_request_error",
                      "param": "response_format", "code": None}}}, "error": None},
        {"id": "batch_req_3", "custom_id": o[2], "response": None, "error": {
            "code": "batch_expired", "message": "This request could not be executed before the completion "
                                                "window expired."}}])
    ant = _write(tmp_path / "anthropic_results.jsonl", [
        {"custom_id": a[0], "result": {"type": "succeeded", "message": MSG_BODY}},
        {"custom_id": a[1], "result": {"type": "errored", "error": {"type": "error", "error": {
            "type": "invalid_request_error", "message": "max_tokens: Field required"}}}},
        {"custom_id": a[2], "result": {"type": "canceled"}},
        {"custom_id": a[3], "result": {"type": "expired"}}])
    return out, err, ant, o, a


def test_import_fixtures_then_twice(tmp_path, monkeypatch, capsys):
    out, err, ant, o, a = _fixtures(tmp_path, monkeypatch)
    cache = tmp_path / "c.sqlite"
    assert main(["batch", "import", str(out), str(err), str(ant), "--dir", str(tmp_path / "bdir"),
                 "--cache", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == "imported 2, errors 5, unknown 0, already cached 0"
    c = CompletionCache(cache)
    assert len(c) == 2 and all(c.get(k) is None for k in (o[1], o[2], *a[1:]))
    got = c.get(o[0])
    assert got.text == "I hear you." and got.batch and got.usage.prompt_tokens == 22
    # gpt-4o-mini lists at $0.15 / $0.60 per 1M tokens; its batch price is half that
    assert got.cost_usd == pytest.approx((22 * 0.075 + 2 * 0.30) / 1e6)
    ga = c.get(a[0])
    assert ga.text == "You are not alone." and ga.cost_usd == pytest.approx((11 * 0.5 + 36 * 2.5) / 1e6)
    errors = [json.loads(x) for x in (tmp_path / "bdir" / "errors.jsonl").read_text().splitlines()]
    assert {e["custom_id"] for e in errors} == {o[1], o[2], *a[1:]}
    assert any("response_format" in e["error"] for e in errors) and any("expired" in e["error"] for e in errors)
    assert main(["batch", "import", str(out), str(ant), "--dir", str(tmp_path / "bdir"),
                 "--cache", str(cache)]) == 0
    # the same errors read again are recorded once: nothing new
    assert capsys.readouterr().out.strip() == "imported 0, errors 0, unknown 0, already cached 2"
    assert len(CompletionCache(cache)) == 2
    assert len((tmp_path / "bdir" / "errors.jsonl").read_text().splitlines()) == len(errors)


def test_errors_are_written_again_next_round_and_answers_are_batch_priced(tmp_path, monkeypatch):
    out, err, ant, o, a = _fixtures(tmp_path, monkeypatch)
    assert main(["batch", "import", str(out), str(err), str(ant), "--dir", str(tmp_path / "bdir"),
                 "--cache", str(tmp_path / "c.sqlite")]) == 0
    run2, _, line = export(tmp_path, monkeypatch, fresh=False)  # the same command again
    assert line.startswith("5 requests in 2 files pending") and "(round 2)" in line
    r2 = Manifest.load(tmp_path / "bdir").rounds[1]
    ids2 = {i for f in r2["files"] for i in Manifest.load(tmp_path / "bdir").ids(f)}
    assert ids2 == {o[1], o[2], *a[1:]}
    rows = [r for r in run2.call_rows]
    assert len(rows) == 3 and all(r["batch"] and r["cached"] for r in rows)  # 2 answers, one duplicate


def test_rerun_before_import_writes_nothing_again(tmp_path, monkeypatch):
    export(tmp_path, monkeypatch)
    _, _, line = export(tmp_path, monkeypatch)
    assert line.startswith("0 new requests; 7 requests of earlier rounds")
    assert len(Manifest.load(tmp_path / "bdir").rounds) == 1


@pytest.mark.parametrize("case", ["other_batch", "truncated", "unknown_id", "wrong_shape", "not_a_result"])
def test_bad_input_one_line_nothing_imported(tmp_path, monkeypatch, capsys, case):
    out, _, ant, o, _ = _fixtures(tmp_path, monkeypatch)
    good = json.loads(out.read_text())
    if case == "other_batch":  # a whole file of another batch's ids
        rows = [dict(good, custom_id=hashlib.sha256(str(i).encode()).hexdigest()) for i in range(3)]
    elif case == "truncated":
        rows = [good, json.dumps(dict(good, custom_id=o[1]))[:-30]]
    elif case == "unknown_id":
        rows = [good, dict(good, custom_id="not-a-key")]
    elif case == "wrong_shape":  # Anthropic-shaped results for the OpenAI requests
        rows = [good, {"custom_id": o[1], "result": {"type": "succeeded", "message": MSG_BODY}}]
    else:
        rows = [good, {"custom_id": o[1], "answer": "b"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).rstrip("\n"))
    cache = tmp_path / "c.sqlite"
    before = len(CompletionCache(cache))
    assert main(["batch", "import", str(bad), str(ant), "--dir", str(tmp_path / "bdir"),
                 "--cache", str(cache)]) == 2
    cap = capsys.readouterr()
    lines = [x for x in cap.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "nothing imported" in lines[0] and "Traceback" not in cap.err, lines
    assert len(CompletionCache(cache)) == before
    assert not (tmp_path / "bdir" / "errors.jsonl").exists()


def test_batch_completion_equals_the_live_clients(tmp_path, monkeypatch):
    """The same HTTP response body, read by the live client and by the importer."""
    from carebench.engine.runner import Runner, RunnerConfig
    from carebench.models import get_model

    with StubServer() as stub:
        for body, spec in ((CHAT_BODY, f"openai:gpt-4o-mini@{stub.base_url}"),
                           (MSG_BODY, f"anthropic:claude-haiku-4-5@{stub.base_url}")):
            stub.handler = lambda req, body=body: StubReply(raw_body=json.dumps(body))
            model = get_model(spec)
            comp = Runner(RunnerConfig(use_cache=False, progress=False)).run_sync([Call(model, _req("x"))]).completions[0]
            endpoint = "/v1/messages" if spec.startswith("anthropic") else "/v1/chat/completions"
            b = completion_from(endpoint, spec, body)
            skip = {"latency_s", "queue_wait_s", "cost_usd", "batch", "cached", "attempts_made"}
            assert {k: v for k, v in b.to_dict().items() if k not in skip} == \
                   {k: v for k, v in comp.to_dict().items() if k not in skip}
            assert b.batch and b.cost_usd == pytest.approx(comp.cost_usd / 2)


def test_batch_price_from_a_user_price_file(tmp_path, monkeypatch):
    from carebench.models.pricing import price_table

    prices = tmp_path / "prices.toml"
    prices.write_text('[models]\n"my-model" = [2.0, 8.0]\n[batch]\n"my-model" = [0.5, 1.0, 0.001]\n')
    monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
    price_table.cache_clear()
    b = completion_from("/v1/chat/completions", "openai:my-model@http://h/v1", CHAT_BODY)
    assert b.cost_usd == pytest.approx((22 * 0.5 + 2 * 1.0) / 1e6 + 0.001) and b.priced
    b = completion_from("/v1/chat/completions", "openai:unknown-model@http://h/v1", CHAT_BODY)
    assert not b.priced and b.to_dict()["cost_usd"] is None  # unpriced stays unpriced, never $0


def test_shared_flags_build_batch_options(tmp_path):
    import typer
    from typer.testing import CliRunner

    from carebench.engine.options import run_options
    from carebench.types import CarebenchError

    opts = run_options(batch=tmp_path / "b", batch_format="vllm")
    assert opts.batch.dir == tmp_path / "b" and opts.batch.format == "vllm"
    assert run_options().batch is None
    with pytest.raises(CarebenchError, match="--batch-format needs --batch"):
        run_options(batch_format="vllm")
    with pytest.raises(CarebenchError, match="--batch-format must be one of"):
        run_options(batch=tmp_path, batch_format="bedrock")
    seen = {}
    app = typer.Typer()

    @app.command()
    def cmd(batch: Batch = None, batch_format: BatchFormat = None) -> None:
        seen["opts"] = run_options(batch=batch, batch_format=batch_format)

    assert CliRunner().invoke(app, ["--batch", str(tmp_path / "d"), "--batch-format", "openai"]).exit_code == 0
    assert seen["opts"].batch.format == "openai"


def test_limits_split_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CAREBENCH_BATCH_LIMITS", "openai.requests=2,anthropic.mb=0.0005")
    from carebench.batch.options import batch_options

    opts = batch_options(tmp_path / "bdir")
    assert opts.limits["openai"][0] == 2 and opts.limits["anthropic"][1] == 500
    monkeypatch.setenv("CAREBENCH_BATCH_DIR", str(tmp_path / "bdir"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    run = Run(RunOptions(cache_path=tmp_path / "c.sqlite", progress=False))  # batch mode from the environment
    oa, an = run.model("openai:gpt-4o-mini"), run.model("anthropic:claude-haiku-4-5")
    run.calls([Call(oa, _req(f"o{i}")) for i in range(5)] + [Call(an, _req(f"a{i}")) for i in range(3)])
    with pytest.raises(BatchPending, match="8 requests in"):
        run.finish()
    files = Manifest.load(tmp_path / "bdir").rounds[0]["files"]
    assert [f["requests"] for f in files if f["format"] == "openai"] == [2, 2, 1]
    ant = [f for f in files if f["format"] == "anthropic"]
    assert sum(f["requests"] for f in ant) == 3 and len(ant) > 1
    assert all(f["bytes"] <= 500 for f in ant)
    for f in files:  # every file still holds whole lines and says so
        data = (tmp_path / "bdir" / f["path"]).read_bytes()
        assert len(data.splitlines()) == f["requests"] and data.endswith(b"\n")


def test_embeddings_round_trip_through_a_vllm_file(tmp_path):
    """Embedding calls become /v1/embeddings lines (one text each); their results give the
    vector the server computed for that text."""
    from batch.fake_run_batch import fake_run_batch
    from carebench.batch.import_ import import_results
    from stub_server import stub_embedding

    spec = "openai-embed:stub-embed@http://127.0.0.1:9/v1"
    opts = RunOptions(cache_path=tmp_path / "c.sqlite", progress=False,
                      batch=BatchOptions(tmp_path / "bdir", "vllm"))
    run = Run(opts)
    texts = ["first text", "second text", "first text"]
    calls = [Call(run.model(spec), ChatRequest(messages(("user", t)), max_tokens=None)) for t in texts]
    run.calls(calls)
    with pytest.raises(BatchPending, match="2 requests in 1 file"):
        run.finish()
    (f,) = Manifest.load(tmp_path / "bdir").rounds[0]["files"]
    assert f["format"] == "vllm" and f["endpoint"] == "/v1/embeddings"
    lines = [json.loads(x) for x in (tmp_path / "bdir" / f["path"]).read_text().splitlines()]
    assert [x["body"]["input"] for x in lines] == [["first text"], ["second text"]]
    out = tmp_path / "out.jsonl"
    fake_run_batch(tmp_path / "bdir" / f["path"], out, None)
    counts = import_results(tmp_path / "bdir", [out], CompletionCache(tmp_path / "c.sqlite"))
    assert (counts.imported, counts.errors) == (2, 0)
    again = Run(RunOptions(cache_path=tmp_path / "c.sqlite", progress=False, batch=BatchOptions(tmp_path / "bdir")))
    res = again.calls([Call(again.model(spec), c.request) for c in calls])
    assert [c.extra["embedding"] for c in res.completions] == [stub_embedding(t) for t in texts]
    again.finish()  # nothing pending: no exit 4

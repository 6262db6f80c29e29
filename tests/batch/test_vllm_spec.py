"""The ``vllm:MODEL[@URL]`` provider spec: live calls are the requests ``openai:MODEL@URL``
sends (the loopback stub's log), the two specs share cache entries for the same URL, and
in batch mode it writes the same vLLM ``run_batch`` files as ``openai:MODEL@URL
--batch-format vllm`` without the flag. Without a URL it writes batch files only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batch.rounds import batch_rounds, live, metrics
from batch.test_roundtrip_suites import risk_answer
from carebench.batch.manifest import Manifest
from carebench.cli import main
from carebench.models.base import ModelSpec, parse_spec
from carebench.types import CarebenchError
from stub_server import StubServer


def _named(run_dir: Path, spec: str, as_spec: str) -> dict:
    """metrics.json (see batch.rounds.metrics) with the model spec it names written as ``as_spec``."""
    return json.loads(json.dumps(metrics(run_dir)).replace(json.dumps(spec)[1:-1], json.dumps(as_spec)[1:-1]))


def _risk(spec: str) -> list[str]:
    return ["risk", "run", "--data", "builtin:sample", "--model", spec, "--method", "llm",
            "--method", "vote:voters=variants", "--bootstrap", "50"]


def test_parse_vllm_specs():
    assert parse_spec("vllm:Qwen/Qwen2.5-7B-Instruct@http://gpu1:8000/v1/") == \
        ModelSpec("vllm", "Qwen/Qwen2.5-7B-Instruct", "http://gpu1:8000/v1")
    assert parse_spec("vllm:Qwen/Qwen2.5-7B-Instruct") == ModelSpec("vllm", "Qwen/Qwen2.5-7B-Instruct", None)
    with pytest.raises(CarebenchError, match=r"^malformed base URL 'gpu1:8000' in 'vllm:m@gpu1:8000'"):
        parse_spec("vllm:m@gpu1:8000")
    with pytest.raises(CarebenchError, match=r"^malformed model spec 'vllm:@http://h/v1': empty model name$"):
        parse_spec("vllm:@http://h/v1")


def test_unknown_spec_error_stays_one_line(capsys):
    assert main(["models", "check", "vlm:m@http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown model provider 'vlm'" in err[0] and "vllm" in err[0], err


def test_live_vllm_sends_what_openai_at_url_sends(tmp_path):
    def bodies(stub) -> list[tuple[str, str]]:
        return sorted((r.path, json.dumps(r.body, sort_keys=True)) for r in stub.requests)

    with StubServer() as stub:
        stub.handler = risk_answer
        live(_risk(f"openai:stub@{stub.base_url}"), tmp_path / "openai", tmp_path / "openai.sqlite")
        sent_openai = bodies(stub)
        stub.reset()
        live(_risk(f"vllm:stub@{stub.base_url}"), tmp_path / "vllm", tmp_path / "vllm.sqlite")
        sent_vllm = bodies(stub)
        # the same URL and cache as the openai: run: every answer comes from the cache
        stub.reset()
        live(_risk(f"vllm:stub@{stub.base_url}"), tmp_path / "vllm2", tmp_path / "openai.sqlite")
        assert stub.requests == []
        oa, vl = f"openai:stub@{stub.base_url}", f"vllm:stub@{stub.base_url}"
    assert sent_vllm == sent_openai and len(sent_openai) > 48
    assert {p for p, _ in sent_vllm} == {"/v1/chat/completions"}
    assert metrics(tmp_path / "vllm") != metrics(tmp_path / "openai")  # it names its model
    assert _named(tmp_path / "vllm", vl, oa) == metrics(tmp_path / "openai") == _named(tmp_path / "vllm2", vl, oa)


def _files(bdir: Path) -> dict[str, bytes]:
    return {p.relative_to(bdir).as_posix(): p.read_bytes() for p in sorted(bdir.glob("round-*/*"))}


def test_batch_vllm_spec_writes_the_files_of_openai_at_url_format_vllm(tmp_path):
    url = "http://127.0.0.1:9/v1"  # nothing listens: no call may be made
    a = _risk(f"vllm:stub@{url}") + ["--out", str(tmp_path / "ra"), "--cache", str(tmp_path / "a.sqlite"),
                                     "--batch", str(tmp_path / "a")]
    b = _risk(f"openai:stub@{url}") + ["--out", str(tmp_path / "rb"), "--cache", str(tmp_path / "b.sqlite"),
                                       "--batch", str(tmp_path / "b"), "--batch-format", "vllm"]
    assert main(a) == 4 and main(b) == 4
    fa, fb = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert fa == fb and len(fa) == 2  # one request file and its id file
    assert list(fa)[1].startswith("round-001/vllm--stub--chat--001.")
    (ea,), (eb,) = Manifest.load(tmp_path / "a").rounds[0]["files"], Manifest.load(tmp_path / "b").rounds[0]["files"]
    assert ea["format"] == eb["format"] == "vllm" and ea["provider"] == "vllm" and ea["requests"] == eb["requests"]
    lines = [json.loads(x) for x in fa[ea["path"]].splitlines()]
    assert {x["url"] for x in lines} == {"/v1/chat/completions"} and {x["body"]["model"] for x in lines} == {"stub"}


def test_vllm_without_url_is_batch_only(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = _risk("vllm:stub")
    assert main([*args, "--out", str(tmp_path / "x"), "--cache", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vllm:stub has no server URL" in err[0], err
    assert not (tmp_path / "x" / "records.jsonl").exists()
    with StubServer() as stub:  # the stub answers the run_batch files only, never live
        stub.handler = risk_answer
        live(_risk(f"openai:stub@{stub.base_url}"), tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              risk_answer, monkeypatch)
        assert len(stub.requests) == n_live
        oa = f"openai:stub@{stub.base_url}"
    assert rounds == 1
    assert _named(tmp_path / "batch", "vllm:stub", oa) == metrics(tmp_path / "live")

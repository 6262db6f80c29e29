"""A support run with a 3-judge panel (an OpenAI, an Anthropic and a vLLM spec), driven
through batch mode round by round offline, writes request files whose every line is a
request of its provider as the provider defines it:

- OpenAI Batch API lines: ``method``/``url`` as openai-python's ``batch_create_params``
  allows, the body an openai-python ``CompletionCreateParamsNonStreaming``;
- Anthropic lines: the anthropic SDK's Message Batches ``Request`` of the API version
  the manifest records (tests/batch/anthropic_versions.py);
- vLLM lines: ``BatchRequestInput`` as written from vLLM's run_batch
  (tests/batch/vllm_protocol.py);
- every schema sent with ``strict: true``: OpenAI's strict rules (tests/batch/strict_rules.py).

Every check is strict about unknown keys (tests/batch/sdk_types.py).
"""

from __future__ import annotations

import json
import typing
import uuid
from pathlib import Path

import httpx
from openai.types.batch_create_params import BatchCreateParams
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from batch.anthropic_versions import BATCH_REQUEST
from batch.sdk_types import typed_dict_errors
from batch.strict_rules import violations
from batch.vllm_protocol import BatchRequestInput
from carebench.batch.manifest import Manifest
from carebench.cli import main
from stub_server import StubServer

OPENAI_ENDPOINTS = set(typing.get_args(typing.get_type_hints(BatchCreateParams, include_extras=True)["endpoint"]
                                       .__args__[0]))


def _answer_round(stub: StubServer, bdir: Path, files: list[dict]) -> list[Path]:
    """Results for every file of a round: OpenAI-shape lines answered by the stub's script,
    Anthropic judges answering every criterion met."""
    outs = []
    with httpx.Client(timeout=60) as client:
        for f in files:
            lines = [json.loads(x) for x in (bdir / f["path"]).read_text("utf-8").splitlines()]
            rows = []
            for req in lines:
                if f["format"] == "anthropic":
                    msg = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant",
                           "model": req["params"]["model"], "stop_reason": "end_turn", "stop_sequence": None,
                           "content": [{"type": "text", "text": json.dumps({"met": True, "rationale": "ok"})}],
                           "usage": {"input_tokens": 10, "output_tokens": 5}}
                    rows.append({"custom_id": req["custom_id"], "result": {"type": "succeeded", "message": msg}})
                    continue
                r = client.post(stub.root_url + req["url"], json=req["body"])
                assert r.status_code == 200, r.text
                rows.append({"id": f"batch_req_{uuid.uuid4().hex}", "custom_id": req["custom_id"],
                             "response": {"status_code": 200, "request_id": "r", "body": r.json()}, "error": None})
            out = bdir / "results" / f["path"].replace(".jsonl", ".output.jsonl")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(json.dumps(x) + "\n" for x in rows), "utf-8")
            outs.append(out)
    return outs


def _check_line(f: dict, obj: dict) -> list[str]:
    if f["format"] == "anthropic":
        return typed_dict_errors(obj, BATCH_REQUEST[f.get("api_version")])
    if f["format"] == "vllm":
        BatchRequestInput.model_validate(obj)  # raises on anything vLLM's model would not take
        body = obj["body"]
        errs = []
    else:
        errs = [] if set(obj) == {"custom_id", "method", "url", "body"} else [f"line keys {sorted(obj)}"]
        errs += [] if obj["method"] == "POST" and obj["url"] in OPENAI_ENDPOINTS else [f"url {obj['url']}"]
        body = obj["body"]
        errs += typed_dict_errors(body, CompletionCreateParamsNonStreaming)
    js = (body.get("response_format") or {}).get("json_schema")
    if js and js.get("strict"):
        errs += violations(js["schema"])
    return errs


def test_support_three_judge_panel_files_pass_the_providers_types(tmp_path, monkeypatch):
    from carebench.support.tasks import load_tasks
    from support.scripted_stub import Script

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    tasks = load_tasks("builtin:sample")[:3]
    bdir = tmp_path / "bdir"
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        args = ["support", "run", "--responder", f"openai:resp-a@{u}", "--judge", f"openai:judge-a@{u}",
                "--judge", f"anthropic:judge-b@{u}", "--judge", "vllm:judge-c", "--limit", "3",
                "--bootstrap", "50", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"),
                "--batch", str(bdir)]
        for _ in range(8):
            rc = main(args)
            if rc == 0:
                break
            assert rc == 4
            m = Manifest.load(bdir)
            outs = _answer_round(stub, bdir, m.rounds[-1]["files"])
            assert main(["batch", "import", *map(str, outs), "--dir", str(bdir),
                         "--cache", str(tmp_path / "c.sqlite")]) == 0
        assert rc == 0
    m = Manifest.load(bdir)
    formats: dict[str, int] = {}
    strict = 0
    for _, f in m.files():
        for line in (bdir / f["path"]).read_text("utf-8").splitlines():
            obj = json.loads(line)
            assert _check_line(f, obj) == [], (f["path"], obj)
            formats[f["format"]] = formats.get(f["format"], 0) + 1
            body = obj.get("body") or {}
            strict += bool(((body.get("response_format") or {}).get("json_schema") or {}).get("strict"))
    assert set(formats) == {"openai", "anthropic", "vllm"}, formats
    assert strict > 0  # the OpenAI and vLLM judges' requests carry strict schemas
    judged = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert judged.get("status") != "incomplete"

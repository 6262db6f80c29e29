"""A stand-in for ``vllm run-batch``: answers a request file the way the loopback stub
answers live, and writes run_batch's output shape.

Each request line's body is POSTed to a :class:`StubServer` (its own instance, so the
test's stub log counts only carebench's live calls) running the same handler, and the
HTTP answer is written as vLLM writes it (``vllm/entrypoints/openai/run_batch.py``):
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``,
with the server's ``ErrorResponse`` (``{"error": {"message", "type", "code"}}``, nested as
vLLM writes it) in ``error`` and no body when the server refused.

As a script: ``python fake_run_batch.py -i IN.jsonl -o OUT.jsonl --handler module:function``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stub_server import StubServer


def answer_file(stub: StubServer, src: Path, dst: Path) -> int:
    """Answer every line of ``src`` through ``stub``; write ``dst``; the number of lines."""
    out = []
    with httpx.Client(timeout=60) as client:
        for raw in src.read_text("utf-8").splitlines():
            if not raw.strip():
                continue
            req = json.loads(raw)
            url = stub.root_url + req["url"]
            r = client.post(url, json=req["body"])
            body = r.json()
            rid = f"vllm-batch-{uuid.uuid4().hex}"
            if r.status_code == 200:
                line = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": req["custom_id"],
                        "response": {"status_code": 200, "request_id": rid, "body": body}, "error": None}
            else:
                line = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": req["custom_id"],
                        "response": {"status_code": r.status_code, "request_id": rid, "body": None},
                        "error": body}  # vLLM's ErrorResponse, nested: {"error": {"message", "type", "code"}}
            out.append(json.dumps(line))
    dst.write_text("".join(x + "\n" for x in out), "utf-8")
    return len(out)


def fake_run_batch(src: Path, dst: Path, handler) -> int:
    with StubServer() as stub:
        stub.handler = handler
        return answer_file(stub, Path(src), Path(dst))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-i", "--input-file", required=True)
    ap.add_argument("-o", "--output-file", required=True)
    ap.add_argument("--handler", required=True, help="module:function answering a StubRequest")
    a = ap.parse_args(argv)
    mod, _, fn = a.handler.partition(":")
    fake_run_batch(Path(a.input_file), Path(a.output_file), getattr(importlib.import_module(mod), fn))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

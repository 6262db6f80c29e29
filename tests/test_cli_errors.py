"""CLI: user errors are one clear line with a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stub_server import StubReply, StubServer


def cb(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "carebench", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["models", "check", "foo:bar"], "unknown model provider 'foo'"),
        (["models", "check", "gpt-4o"], "malformed model spec"),
        (["models", "check", "openai:gpt-4o"], "OPENAI_API_KEY is not set"),
        (["models", "check", "openai:m@http://127.0.0.1:9/v1", "--timeout", "2"], "cannot reach"),
        (["models", "check", "llamacpp:/nonexistent/model.gguf"], "not found"),
        (["models", "check", "replay:/nonexistent/run"], "replay recording not found"),
        (["report", "/nonexistent/run"], "not found"),
    ],
)
def test_user_errors_are_one_line(args, message):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    p = cb(*args, env=env)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("carebench: error:") and message in lines[0], p.stderr


def test_models_check_prints_ok_latency_answer():
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content="ready", delay=0.01)
        p = cb("models", "check", f"openai:stub@{stub.base_url}")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok ") and "latency" in p.stdout and "'ready'" in p.stdout

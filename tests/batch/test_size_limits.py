"""Request files are split at the providers' size limits read in decimal megabytes
(OpenAI: 200 MB per input file; Anthropic: 256 MB per batch), the stricter reading."""

from __future__ import annotations

import json

import pytest

from carebench.batch.manifest import Manifest
from carebench.batch.options import DEFAULT_LIMITS, parse_limits
from carebench.engine.options import RunOptions
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.types import BatchPending, ChatRequest, messages


def test_default_limits_are_decimal_megabytes():
    assert DEFAULT_LIMITS["openai"] == (50_000, 200_000_000)
    assert DEFAULT_LIMITS["vllm"] == (50_000, 200_000_000)
    assert DEFAULT_LIMITS["anthropic"] == (100_000, 256_000_000)
    assert parse_limits("mb=0.001")["openai"][1] == 1000
    assert parse_limits("anthropic.mb=256")["anthropic"][1] == 256 * 10**6


def _export(tmp_path, monkeypatch, name: str, limits: str | None) -> list[dict]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    if limits is None:
        monkeypatch.delenv("CAREBENCH_BATCH_LIMITS", raising=False)
    else:
        monkeypatch.setenv("CAREBENCH_BATCH_LIMITS", limits)
    monkeypatch.setenv("CAREBENCH_BATCH_DIR", str(tmp_path / name))
    run = Run(RunOptions(cache_path=tmp_path / f"{name}.sqlite", progress=False))
    model = run.model("openai:gpt-4o-mini")
    run.calls([Call(model, ChatRequest(messages(("user", "x" * (40 + 7 * i))), max_tokens=16)) for i in range(3)])
    with pytest.raises(BatchPending):
        run.finish()
    return Manifest.load(tmp_path / name).rounds[0]["files"]


def test_split_boundary_in_bytes(tmp_path, monkeypatch):
    (whole,) = _export(tmp_path, monkeypatch, "whole", None)
    sizes = [len(x) + 1 for x in (tmp_path / "whole" / whole["path"]).read_bytes().splitlines()]
    assert sum(sizes) == whole["bytes"] and len(sizes) == 3
    two = sizes[0] + sizes[1]  # the first two lines fill a file exactly: they stay together
    files = _export(tmp_path, monkeypatch, "exact", f"openai.mb={two / 1e6}")
    assert [(f["requests"], f["bytes"]) for f in files] == [(2, two), (1, sizes[2])]
    files = _export(tmp_path, monkeypatch, "short", f"openai.mb={(two - 1) / 1e6}")  # one byte less: split
    assert [f["requests"] for f in files] == [1, 1, 1]
    for f in files:
        lines = (tmp_path / "short" / f["path"]).read_bytes().splitlines()
        assert all(json.loads(x)["custom_id"] for x in lines)

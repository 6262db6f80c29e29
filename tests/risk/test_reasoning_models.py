"""Reasoning models are reachable (issue 10, item 9): per-model request options, against a
stub that refuses temperature, max_tokens and logprobs the way reasoning endpoints do."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.models.options import collect_model_options, parse_model_option
from carebench.risk.cli import app
from carebench.types import CarebenchError
from stub_server import StubReply, StubServer


def _run(args):
    return CliRunner().invoke(app, args, catch_exceptions=True)


def test_model_option_syntax():
    assert parse_model_option("openai:o4-mini@http://127.0.0.1:8/v1:reasoning_effort=low") == (
        "openai:o4-mini@http://127.0.0.1:8/v1", "reasoning_effort", "low")
    opts = collect_model_options(["openai:x:reasoning=true", "openai:x:max_tokens=800",
                                  'openai:x:extra.safety_settings=[{"threshold": "BLOCK_NONE"}]'],
                                 None)["openai:x"]
    assert opts.to_dict() == {"token_param": "max_completion_tokens", "max_tokens": 800,
                              "temperature": "omit", "logprobs": False,
                              "extra": {"safety_settings": [{"threshold": "BLOCK_NONE"}]}}
    with pytest.raises(CarebenchError, match="unknown model option 'effort'"):
        collect_model_options(["openai:x:effort=low"], None)
    with pytest.raises(CarebenchError, match="SPEC:key=value"):
        parse_model_option("reasoning_effort=low")


def test_reasoning_endpoint_needs_options_and_records_reasoning_tokens(tmp_path, monkeypatch):
    from carebench.models.pricing import price_table

    prices = tmp_path / "p.toml"
    prices.write_text('[models]\n"o-stub" = [1.0, 10.0]\n')
    monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
    price_table.cache_clear()
    with StubServer(reasoning_endpoint=True) as stub:
        stub.handler = lambda req: StubReply(content="c", usage=(200, 1), reasoning_tokens=300)
        spec = f"openai:o-stub@{stub.base_url}"
        base = ["run", "--data", "builtin:sample", "--method", "llm", "--model", spec,
                "--bootstrap", "20", "--cache", str(tmp_path / "c.db")]
        # today's request (max_tokens, temperature 0, logprobs) is refused on every item
        res = _run([*base, "--out", str(tmp_path / "plain")])
        assert res.exit_code == 0, repr(res.exception)
        plain = json.loads((tmp_path / "plain" / "metrics.json").read_text())["methods"]["llm"]
        assert plain["failures"] == 48 and plain["flagged"] is True
        assert "max_completion_tokens" in plain["top_failure_reasons"][0][0]
        n0 = len(stub.requests)
        opts = ["--model-option", f"{spec}:reasoning=true", "--model-option", f"{spec}:max_tokens=600",
                "--model-option", f"{spec}:reasoning_effort=low"]
        res = _run([*base, *opts, "--out", str(tmp_path / "low")])
        assert res.exit_code == 0, repr(res.exception)
        bodies = [r.body for r in list(stub.requests)[n0:]]
        n1 = len(stub.requests)
        # options are part of the cache key: the same options hit the cache ...
        res = _run([*base, *opts, "--out", str(tmp_path / "again")])
        n2 = len(stub.requests)
        # ... another reasoning effort does not
        opts[-1] = f"{spec}:reasoning_effort=high"
        res = _run([*base, *opts, "--out", str(tmp_path / "high")])
        n3 = len(stub.requests)
    assert len(bodies) == 48 and all(
        b["max_completion_tokens"] == 600 and "max_tokens" not in b and "temperature" not in b
        and "logprobs" not in b and b["reasoning_effort"] == "low" for b in bodies)
    assert n2 == n1 and n3 == n1 + 48
    low = json.loads((tmp_path / "low" / "metrics.json").read_text())["methods"]["llm"]
    assert low["failures"] == 0 and low["flagged"] is False
    recs = read_jsonl(tmp_path / "low" / "records.jsonl")
    assert all(r["usage"]["reasoning_tokens"] == 300 and r["usage"]["completion_tokens"] == 301
               for r in recs)
    # cost: 200 prompt tokens at $1/M + 301 output tokens (reasoning included) at $10/M
    assert all(r["cost_usd"] == pytest.approx((200 * 1.0 + 301 * 10.0) / 1e6) for r in recs)
    assert low["cost"]["mean_reasoning_tokens"] == 300
    manifest = json.loads((tmp_path / "low" / "manifest.json").read_text())
    assert manifest["config"]["model_options"][spec]["reasoning_effort"] == "low"

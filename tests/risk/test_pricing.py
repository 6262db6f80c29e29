"""Risk runs never invent a price (issue 10, item 8): unpriced is null, said in the report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from stub_server import StubReply, StubServer


def _run(args):
    return CliRunner().invoke(app, args, catch_exceptions=True)


def test_unpriced_model_is_null_and_reported_priced_model_costs_tokens_times_price(
        tmp_path, monkeypatch):
    from carebench.models.pricing import price_table

    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content="b", usage=(1000, 1))
        spec = f"openai:gpt-5.5@{stub.base_url}"  # not gpt-5: unpriced
        common = ["--data", "builtin:sample", "--method", "llm", "--bootstrap", "50",
                  "--cache", str(tmp_path / "c.db")]
        dry = _run(["run", *common, "--model", spec, "--dry-run", "--json"])
        assert dry.exit_code == 0, repr(dry.exception)
        assert "unpriced: " + spec in dry.output and "$0.0000" not in dry.output.split("\n", 1)[1]
        res = _run(["run", *common, "--model", spec, "--out", str(tmp_path / "u")])
        assert res.exit_code == 0, repr(res.exception)
        over = _run(["run", *common, "--model", spec, "--budget", "1", "--out", str(tmp_path / "b")])
        assert over.exit_code != 0 and "--budget cannot be enforced" in str(over.exception)
        prices = tmp_path / "p.toml"
        prices.write_text('[models]\n"gpt-5.5" = [2.0, 100.0]\n')
        monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
        price_table.cache_clear()
        res = _run(["run", *common, "--no-cache", "--model", spec, "--out", str(tmp_path / "p")])
        assert res.exit_code == 0, repr(res.exception)
    recs = read_jsonl(tmp_path / "u" / "records.jsonl")
    assert all(r["cost_usd"] is None for r in recs)
    cost = json.loads((tmp_path / "u" / "metrics.json").read_text())["methods"]["llm"]["cost"]
    assert cost["usd_per_1k"] is None and cost["unpriced"] is True
    md = (tmp_path / "u" / "report.md").read_text()
    assert "unpriced: " + spec in md and "| unpriced |" in md.replace("  ", " ")
    # priced: 1000 prompt tokens at $2/M + 1 completion token at $100/M = $0.0021 per item
    priced = read_jsonl(tmp_path / "p" / "records.jsonl")
    assert all(r["cost_usd"] == pytest.approx(0.0021) for r in priced)
    cost = json.loads((tmp_path / "p" / "metrics.json").read_text())["methods"]["llm"]["cost"]
    assert cost["usd_per_1k"] == pytest.approx(2.1) and cost["unpriced"] is False

"""``--dry-run`` prints a short human summary (calls, cached, cost or which models are
unpriced, never "$0" for them); ``--dry-run --json`` prints the whole plan as JSON."""

from __future__ import annotations

import json

from carebench.cli import main

ITEMS = 48  # builtin:sample has 48 items; the llm method asks one call per item


def _dry(capsys, spec, *extra):
    assert main(["risk", "run", "--data", "builtin:sample", "--method", "llm", "--model", spec,
                 "--dry-run", *extra]) == 0
    return capsys.readouterr().out


def test_summary_names_unpriced_models_and_json_stays_behind_the_flag(capsys):
    spec = "openai:my-local-model@http://127.0.0.1:9/v1"
    out = _dry(capsys, spec)
    lines = out.strip().splitlines()
    assert lines[0] == f"dry run (risk): {ITEMS} calls, 0 answered by the cache, {ITEMS} to make"
    assert lines[1] == f"cost unknown (unpriced: {spec})"
    assert "$0" not in out and "{" not in out
    assert lines[-1] == "the whole plan as JSON: add --json"
    plan = json.loads(_dry(capsys, spec, "--json"))
    assert plan["calls"] == ITEMS and plan["unpriced"] == [spec]


def test_summary_prices_a_priced_model(capsys, price_per_call):
    price_per_call(0.01, "priced-model")
    out = _dry(capsys, "openai:priced-model@http://127.0.0.1:9/v1")
    assert f"estimated cost ${ITEMS * 0.01:.4f}" in out.splitlines()[1]
    assert "unpriced" not in out

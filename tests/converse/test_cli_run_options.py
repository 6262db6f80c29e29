"""``converse run`` and ``converse judge`` put the shared run flags into the config's
``run`` (one RunOptions, built by ``carebench.engine.options.run_options``), and the suite
runs with exactly those options. The model flags arrive parsed (``ModelSpec``) and the
manifest's config holds their text (expected values written out by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carebench.cli import main
from carebench.converse.suite import ConverseConfig
from carebench.engine.skeleton import Plan
from carebench.models.base import ModelSpec


@pytest.fixture
def captured(monkeypatch):
    """Stands in for ``run_converse``: records the config and answers with an empty plan."""
    from carebench.converse import suite

    seen = []

    def fake(cfg, cache=None):
        seen.append(cfg)
        return Plan("converse", [])

    monkeypatch.setattr(suite, "run_converse", fake)
    return seen


def test_run_flags_reach_the_config(captured, tmp_path):
    out, cache = tmp_path / "out", tmp_path / "c.sqlite"
    assert main(["converse", "run", "--simulator", "openai:sim", "--chatbot", "openai:bot",
                 "--judge", "openai:judge", "--out", str(out), "--cache", str(cache), "--budget", "2.5",
                 "--concurrency", "3", "--timeout", "9", "--retries", "4",
                 "--model-option", "openai:bot:max_tokens=64", "--dry-run"]) == 0
    (cfg,) = captured
    r = cfg.options
    assert (r.out, r.cache_path, r.use_cache, r.budget_usd, r.concurrency, r.timeout_s, r.max_retries,
            r.dry_run) == (out, cache, True, 2.5, 3, 9.0, 4, True)
    assert r.model_options["openai:bot"].max_tokens == 64
    # the command parsed each model flag once; the config holds the ModelSpec objects
    assert (cfg.simulators, cfg.chatbots, cfg.judges) == (
        [ModelSpec("openai", "sim")], [ModelSpec("openai", "bot")], [ModelSpec("openai", "judge")])


def test_judge_flags_reach_the_config(captured, tmp_path):
    assert main(["converse", "judge", str(tmp_path / "earlier"), "--judge", "openai:judge", "--no-cache",
                 "--budget", "0.5", "--out", str(tmp_path / "j"), "--dry-run"]) == 0
    (cfg,) = captured
    assert cfg.from_run == str(tmp_path / "earlier")
    assert (cfg.options.use_cache, cfg.options.budget_usd, cfg.options.out, cfg.options.dry_run) == (
        False, 0.5, Path(tmp_path / "j"), True)


def test_defaults_are_the_shared_defaults():
    from carebench.converse.suite import ConverseConfig
    from carebench.engine.options import RunOptions

    r = ConverseConfig().options
    assert isinstance(r, RunOptions)
    assert (r.out, r.cache_path, r.use_cache, r.budget_usd, r.dry_run, r.concurrency, r.timeout_s) == (
        None, None, True, None, False, None, 120.0)


URL = "http://127.0.0.1:9/v1"


def test_every_model_flag_is_parsed_and_the_manifest_gets_its_text(captured):
    assert main(["converse", "run", "--simulator", f"openai:sim@{URL}/", "--chatbot", "anthropic:bot",
                 "--chatbot", "openai:bot2", "--judge", "openai:judge", "--simulator-questions", "role-reversal",
                 "--simulator-judge", f"openai:sq@{URL}", "--dry-run"]) == 0
    (cfg,) = captured
    assert cfg.simulators == [ModelSpec("openai", "sim", URL)]
    assert cfg.chatbots == [ModelSpec("anthropic", "bot"), ModelSpec("openai", "bot2")]
    assert cfg.judges == [ModelSpec("openai", "judge")] and cfg.simulator_judge == ModelSpec("openai", "sq", URL)
    d = json.loads(json.dumps(cfg.manifest_config()))  # plain JSON
    assert (d["simulators"], d["chatbots"], d["judges"], d["simulator_judge"]) == (
        [f"openai:sim@{URL}"], ["anthropic:bot", "openai:bot2"], ["openai:judge"], f"openai:sq@{URL}")
    assert "notes" not in d
    assert ConverseConfig(judges=["openai:j"]).manifest_config()["simulator_judge"] is None


def test_a_calibrated_judge_is_parsed_from_its_selection(captured, tmp_path):
    d = tmp_path / "cal"
    d.mkdir()
    (d / "selection.json").write_text(json.dumps({"judge": "openai:j2", "spec": f"openai:j2@{URL}"}))
    assert main(["converse", "judge", str(tmp_path / "earlier"), "--judge", "openai:j1",
                 "--judge-from", str(d), "--dry-run"]) == 0
    (cfg,) = captured
    assert cfg.judges == [ModelSpec("openai", "j1"), ModelSpec("openai", "j2", URL)]
    assert cfg.manifest_config()["judges"] == ["openai:j1", f"openai:j2@{URL}"]


def test_a_malformed_model_is_one_line_and_exit_2(captured, tmp_path, capsys):
    for flags in (["--simulator", "sim", "--chatbot", "openai:b", "--judge", "openai:j"],
                  ["--simulator", "openai:s", "--chatbot", "openai:b", "--judge", "openai:j",
                   "--simulator-questions", "role-reversal", "--simulator-judge", "gpt-4o"]):
        rc = main(["converse", "run", *flags, "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert rc == 2 and "malformed model spec" in err and len(err.strip().splitlines()) == 1
    d = tmp_path / "cal"
    d.mkdir()
    (d / "selection.json").write_text(json.dumps({"judge": "x", "spec": "nope:x"}))
    rc = main(["converse", "judge", str(tmp_path / "earlier"), "--judge-from", str(d)])
    err = capsys.readouterr().err
    assert rc == 2 and f"--judge-from {d}: unknown model provider 'nope'" in err
    assert len(err.strip().splitlines()) == 1
    assert not captured and not (tmp_path / "o").exists()

"""``converse run`` and ``converse judge`` put the shared run flags into the config's
``run`` (one RunOptions, built by ``carebench.engine.options.run_options``), and the suite
runs with exactly those options."""

from __future__ import annotations

from pathlib import Path

import pytest

from carebench.cli import main
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

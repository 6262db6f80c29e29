"""Risk's model specs are parsed once, where they enter (the command line or the config
file), and travel as ``ModelSpec``; the manifest still holds their text. Expected values are
written out by hand."""

from __future__ import annotations

import json

from carebench.cli import main
from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.models.base import ModelSpec
from carebench.risk.config_file import config_from_file
from carebench.types import CarebenchError

URL = "http://127.0.0.1:9/v1"


def test_a_config_files_models_are_parsed_once_and_written_back_as_text(tmp_path):
    f = tmp_path / "risk.yaml"
    f.write_text("data: builtin:sample\nmodels: ['openai:a@http://127.0.0.1:9/v1/', anthropic:b]\n"
                 "moderation_model: openai-moderation:omni-moderation-latest\n"
                 "methods:\n  - llm\n  - method: llm-cot\n    model: openai:c\n  - tfidf-lr\n")
    cfg = config_from_file(f, {})
    a, b, c = ModelSpec("openai", "a", URL), ModelSpec("anthropic", "b"), ModelSpec("openai", "c")
    assert cfg.model is None and cfg.moderation_model == ModelSpec("openai-moderation", "omni-moderation-latest")
    assert [(m.method, m.model) for m in cfg.methods] == [("llm", a), ("llm", b), ("llm-cot", c), ("tfidf-lr", None)]
    d = json.loads(json.dumps(cfg.to_dict()))  # plain JSON, specs as their text
    assert d["model"] is None and d["moderation_model"] == "openai-moderation:omni-moderation-latest"
    assert [m["model"] for m in d["methods"]] == [f"openai:a@{URL}", "anthropic:b", "openai:c", None]
    assert d["methods"][0] == {"method": "llm", "label": None, "model": f"openai:a@{URL}",
                               "moderation_model": None, "options": {}, "voter_models": []}


def test_the_command_lines_model_list_replaces_the_files_model(tmp_path):
    f = tmp_path / "risk.yaml"
    f.write_text("data: builtin:sample\nmodel: openai:old\nmethods: [llm]\n")
    one = config_from_file(f, {"models": [ModelSpec("openai", "z")]})
    assert one.model == ModelSpec("openai", "z") and [m.model for m in one.methods] == [ModelSpec("openai", "z")]
    two = config_from_file(f, {"models": [ModelSpec("openai", "x"), ModelSpec("openai", "y")]})
    assert two.model is None and [m.model for m in two.methods] == [ModelSpec("openai", "x"), ModelSpec("openai", "y")]


def test_two_models_on_the_command_line_and_a_config_file_plan_one_stage_each(tmp_path, capsys):
    f = tmp_path / "risk.yaml"
    f.write_text("data: builtin:sample\nmodel: openai:old\nmethods: [llm]\n")
    rc = main(["risk", "run", "--config", str(f), "--model", f"openai:x@{URL}", "--model", f"openai:y@{URL}/",
               "--limit", "5", "--dry-run", "--json", "--cache", str(tmp_path / "c.db")])
    plan = json.loads(capsys.readouterr().out)
    assert rc == 0
    # one stage per model, named method@model with the spec's one text (no trailing slash)
    assert [(s["name"], s["calls"]) for s in plan["stages"]] == [(f"llm@openai:x@{URL}", 5), (f"llm@openai:y@{URL}", 5)]


def test_a_malformed_model_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(["risk", "run", "--data", "builtin:sample", "--method", "llm", "--model", "gpt-4o",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "malformed model spec 'gpt-4o'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    f = tmp_path / "risk.yaml"
    f.write_text("data: builtin:sample\nmethods:\n  - method: llm\n    model: gpt-4o\n")
    try:
        config_from_file(f, {})
    except CarebenchError as e:
        assert str(e).startswith(f"{f}: malformed model spec 'gpt-4o'")
    else:
        raise AssertionError("a malformed spec in a config file was accepted")


def test_the_run_builds_one_model_per_spec_however_it_is_named(tmp_path):
    opts = run_options(dry_run=True, no_cache=True, progress=False,
                       model_option=[f"openai:m@{URL}/:max_tokens=5"])  # typed with a trailing slash
    with Run(opts) as run:
        first = run.model(ModelSpec("openai", "m", URL))
        assert run.model(f"openai:m@{URL}") is first and run.model(f" openai:m@{URL}/") is first
        assert run.model_specs() == [f"openai:m@{URL}"]
        assert first.request_options.max_tokens == 5

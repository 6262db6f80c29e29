"""Plural's model flags are parsed once, in the command, and travel as ``ModelSpec``; the
manifest holds their text as before, and report labels read the spec's fields. Expected
values are written out by hand."""

from __future__ import annotations

import json

import pytest

from carebench.cli import main
from carebench.models.base import ModelSpec
from carebench.plural.commands import calibrate, freeze, label, run
from carebench.plural.report import _short_one
from config_capture import capture_config

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def captured(monkeypatch):
    seen = {}
    monkeypatch.setattr(run, "run_plural", capture_config(seen, "run"))
    monkeypatch.setattr(calibrate, "run_calibrate", capture_config(seen, "calibrate"))
    monkeypatch.setattr(freeze, "run_freeze", capture_config(seen, "freeze"))
    monkeypatch.setattr(label, "run_label", capture_config(seen, "label"))
    return seen


def test_the_commands_parse_their_models_once(captured, tmp_path):
    assert main(["plural", "run", "--release", str(tmp_path), "--system", f"openai:s@{URL}/",
                 "--judge", "anthropic:j", "--judge", "anthropic:j"]) == 2
    cfg = captured["run"]
    assert cfg.systems == [ModelSpec("openai", "s", URL)] and cfg.judges == [ModelSpec("anthropic", "j")] * 2
    d = json.loads(json.dumps(cfg.manifest_config()))  # plain JSON, specs as their text
    assert (d["systems"], d["judges"]) == ([f"openai:s@{URL}"], ["anthropic:j", "anthropic:j"])
    assert main(["plural", "calibrate", "--model", "openai:m"]) == 2
    assert main(["plural", "freeze", "--model", f"openai:m@{URL}"]) == 2
    assert main(["plural", "label", "--profiles", str(tmp_path), "--model", "llamacpp:builtin"]) == 2
    assert captured["calibrate"].model == ModelSpec("openai", "m")
    assert captured["freeze"].manifest_config()["model"] == f"openai:m@{URL}"
    assert captured["label"].model == ModelSpec("llamacpp", "builtin")
    assert main(["plural", "freeze"]) == 2 and captured["freeze"].manifest_config()["model"] is None


def test_a_malformed_model_is_one_line_and_exit_2(captured, tmp_path, capsys):
    for args in (["run", "--release", str(tmp_path), "--system", "gpt-4o", "--judge", "openai:j"],
                 ["run", "--release", str(tmp_path), "--system", "openai:s", "--judge", "gpt-4o"],
                 ["calibrate", "--model", "gpt-4o"]):
        rc = main(["plural", *args])
        err = capsys.readouterr().err
        assert rc == 2 and "malformed model spec 'gpt-4o'" in err and len(err.strip().splitlines()) == 1
    assert not captured


def test_report_labels_read_the_spec_fields():
    assert _short_one(f"openai:gpt-4o@{URL}") == "openai:gpt-4o"
    assert _short_one(f"openai:gpt-4o@{URL}#2") == "openai:gpt-4o#2"
    assert _short_one("llamacpp:/models/SmolLM2.gguf#3") == "llamacpp:SmolLM2.gguf#3"
    assert _short_one("openai:org/model") == "openai:org/model"  # a directory is kept but for local files
    assert _short_one("reference") == "reference"

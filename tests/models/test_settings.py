"""Per-model generation settings: SPEC:key=value options and settings files."""

from __future__ import annotations

import json

import pytest

from carebench.models.settings import (
    ModelSettings,
    load_model_settings,
    model_settings,
    parse_model_options,
)
from carebench.types import CarebenchError


def test_spec_is_everything_before_the_last_colon():
    opts = parse_model_options([
        "openai:m@http://127.0.0.1:8000/v1:temperature=1",
        "openai:m@http://127.0.0.1:8000/v1:max_tokens=8192",
        "anthropic:claude-x:top_p=0.9",
        "anthropic:claude-x:top_p=0.5",  # later wins
    ])
    assert opts == {
        "openai:m@http://127.0.0.1:8000/v1": ModelSettings(temperature=1.0, max_tokens=8192),
        "anthropic:claude-x": ModelSettings(top_p=0.5),
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("temperature=1", "expects SPEC:key=value"),
        ("openai:m:temperature", "expects SPEC:key=value"),
        ("openai:m:temp=1", "unknown setting 'temp'"),
        ("openai:m:temperature=hot", "temperature must be a number"),
        ("openai:m:temperature=3", "between 0 and 2"),
        ("openai:m:max_tokens=0", "positive whole number"),
        ("openai:m:max_tokens=1.5", "positive whole number"),
        ("openai:m:top_p=nan", "between 0 and 1"),
    ],
)
def test_bad_options_are_one_line_errors(value, message):
    with pytest.raises(CarebenchError, match=message):
        parse_model_options([value], "--responder-option")


def test_settings_file_then_options_override(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('["openai:a"]\ntemperature = 1\nmax_tokens = 8192\n\n["openai:b@http://h:1/v1"]\ntop_p = 0.8\n')
    assert load_model_settings(toml) == {"openai:a": ModelSettings(1.0, 8192),
                                         "openai:b@http://h:1/v1": ModelSettings(top_p=0.8)}
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"openai:a": {"temperature": 0.2}}))
    merged = model_settings(["openai:a", "openai:b@http://h:1/v1"], toml, ["openai:a:temperature=0"])
    assert merged["openai:a"] == ModelSettings(temperature=0.0, max_tokens=8192)
    assert model_settings(["openai:a"], js) == {"openai:a": ModelSettings(temperature=0.2)}
    with pytest.raises(CarebenchError, match="'openai:c', which is not a model of this run"):
        model_settings(["openai:a"], None, ["openai:c:temperature=1"])
    bad = tmp_path / "bad.toml"
    bad.write_text('["openai:a"]\nmax_tokens = true\n')
    with pytest.raises(CarebenchError, match=r"bad.toml \[openai:a\]: max_tokens"):
        load_model_settings(bad)
    (tmp_path / "s.yaml").write_text("a: 1\n")
    with pytest.raises(CarebenchError, match="must be .toml or .json"):
        load_model_settings(tmp_path / "s.yaml")

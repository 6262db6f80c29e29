"""GBNF generation for structured answers.

Pure-text checks run without llama.cpp: the generated grammars (which never recurse)
are translated to a Python regex by a tiny independent GBNF reader (tests/gbnf_check.py) and matched
against JSON texts known to be valid or invalid for the schema. With llama_cpp
installed, the grammars must also compile in llama.cpp's own parser.
"""

from __future__ import annotations

import json
import sys

import pytest

from carebench.models.grammar import (
    UnsupportedSchema,
    choice_grammar,
    gbnf_literal,
    grammar_for,
    json_grammar,
    json_grammar_builtin,
)
from carebench.types import CarebenchError, StructuredSpec
from gbnf_check import gbnf_to_regex


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_gbnf_literal_escapes():
    assert gbnf_literal('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert gbnf_literal("\x01") == '"\\x01"'


def test_choice_grammar_exact_text():
    assert choice_grammar(("a", "b", "c", "d")) == 'root ::= "a" | "b" | "c" | "d"\n'


def test_choice_grammar_matches_only_labels():
    labels = ("Indicator", "Ideation", "Behavior", "Attempt", 'say "no"')
    rx = gbnf_to_regex(choice_grammar(labels))
    for lab in labels:
        assert rx.fullmatch(lab)
    for bad in ("", "indicator", " Indicator", "Indicator.", "IdeationBehavior", "a"):
        assert not rx.fullmatch(bad), bad


def test_choice_grammar_rejects_empty():
    with pytest.raises(CarebenchError):
        choice_grammar(())
    with pytest.raises(CarebenchError):
        choice_grammar(("a", ""))


RISK_SCHEMA = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "minimum": 0, "maximum": 3},
        "label": {"type": "string", "enum": ["indicator", "ideation", "behavior", "attempt"]},
        "rationale": {"type": "string"},
        "urgent": {"type": "boolean"},
        "signals": {
            "type": "array",
            "items": {"type": "string", "enum": ["plan", "means", "history"]},
            "maxItems": 3,
        },
        "score": {"type": "integer", "enum": [1, 2, 5]},
    },
    "required": ["level", "label", "rationale", "urgent", "signals", "score"],
}


def _ok_instance(**over: object) -> dict:
    d = {
        "level": 2,
        "label": "behavior",
        "rationale": 'mentions a "plan"\nand a date',
        "urgent": True,
        "signals": ["plan", "means"],
        "score": 5,
    }
    d.update(over)
    return d


def test_builtin_json_grammar_accepts_valid_instances():
    rx = gbnf_to_regex(json_grammar_builtin(json.dumps(RISK_SCHEMA)))
    for inst in (
        _ok_instance(),
        _ok_instance(level=0, signals=[], urgent=False, rationale=""),
        _ok_instance(level=3, signals=["history", "plan", "means"], score=1),
        _ok_instance(rationale="caf\u00e9 \\ tab\t"),
    ):
        assert rx.fullmatch(compact(inst)), compact(inst)


@pytest.mark.parametrize(
    "over",
    [
        {"level": 4},
        {"level": -1},
        {"level": 1.5},
        {"label": "Ideation"},
        {"urgent": "yes"},
        {"signals": ["plan", "other"]},
        {"signals": ["plan", "plan", "plan", "plan"]},
        {"score": 3},
        {"rationale": 7},
    ],
)
def test_builtin_json_grammar_rejects_invalid_values(over):
    rx = gbnf_to_regex(json_grammar_builtin(RISK_SCHEMA))
    assert not rx.fullmatch(compact(_ok_instance(**over)))


def test_builtin_json_grammar_rejects_missing_and_extra_properties():
    rx = gbnf_to_regex(json_grammar_builtin(RISK_SCHEMA))
    inst = _ok_instance()
    del inst["urgent"]
    assert not rx.fullmatch(compact(inst))
    assert not rx.fullmatch(compact({**_ok_instance(), "extra": 1}))
    assert not rx.fullmatch(compact(_ok_instance()) + " trailing")


def test_builtin_optional_properties_are_optional_but_ordered():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 1, "maximum": 2},
            "b": {"type": "boolean"},
            "c": {"type": "null"},
        },
        "required": [],
    }
    rx = gbnf_to_regex(json_grammar_builtin(schema))
    for inst in (
        {},
        {"a": 1},
        {"b": False},
        {"c": None},
        {"a": 2, "c": None},
        {"a": 1, "b": True, "c": None},
    ):
        assert rx.fullmatch(compact(inst)), inst
    assert not rx.fullmatch('{"b":true,"a":1}')
    assert not rx.fullmatch('{,"a":1}')
    assert not rx.fullmatch('{"a":1,}')


def test_builtin_wide_integer_range_and_numbers():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0},
            "x": {"type": "number"},
            "k": {"type": "integer"},
        },
        "required": ["n", "x", "k"],
    }
    rx = gbnf_to_regex(json_grammar_builtin(schema))
    assert rx.fullmatch('{"n":123456,"x":-0.25e3,"k":-7}')
    assert not rx.fullmatch('{"n":-1,"x":1,"k":0}')
    assert not rx.fullmatch('{"n":01,"x":1,"k":0}')


def test_builtin_array_min_items_and_anyof():
    schema = {
        "type": "object",
        "properties": {
            "xs": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}, "minItems": 2},
            "y": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["xs", "y"],
    }
    rx = gbnf_to_regex(json_grammar_builtin(schema))
    assert rx.fullmatch('{"xs":[1,2,2,1],"y":null}')
    assert rx.fullmatch('{"xs":[1,1],"y":"s"}')
    assert not rx.fullmatch('{"xs":[1],"y":null}')
    assert not rx.fullmatch('{"xs":[],"y":null}')


def test_builtin_string_length_bounds():
    schema = {
        "type": "object",
        "properties": {"why": {"type": "string", "minLength": 2, "maxLength": 5}},
        "required": ["why"],
    }
    rx = gbnf_to_regex(json_grammar_builtin(schema))
    for ok in ("ab", "abcde", 'a"b', "a\nb"):  # an escape counts as one character
        assert rx.fullmatch(compact({"why": ok})), ok
    for bad in ("a", "abcdef", 'a"b"c"d'):
        assert not rx.fullmatch(compact({"why": bad})), bad
    assert not rx.fullmatch('{"why":"a\nb"}')  # a raw newline is not JSON


def test_builtin_strings_never_contain_raw_control_characters():
    rx = gbnf_to_regex(json_grammar_builtin({"type": "string"}))
    assert rx.fullmatch(compact("line\nbreak"))
    assert not rx.fullmatch('"line\nbreak"')  # raw newline inside the quotes
    assert not rx.fullmatch('"tab\there"')


def test_builtin_rejects_bad_and_unsupported_schemas():
    for bad in (
        '{"$ref": "#/defs/x"}',
        '{"type": "string", "pattern": "^a"}',
        '{"type": "object", "properties": {}, "additionalProperties": true}',
        "[1]",
        "not json",
        '{"type": "object", "required": ["x"]}',
        '{"type": "string", "minLength": 3, "maxLength": 2}',
    ):
        with pytest.raises(CarebenchError):
            json_grammar_builtin(bad)


def test_pydantic_schema_with_defs_enum_and_optional():
    import enum

    from pydantic import BaseModel, Field

    class Level(str, enum.Enum):
        low = "low"
        high = "high"

    class Part(BaseModel):
        level: Level
        score: int = Field(ge=0, le=3)

    class Answer(BaseModel):
        parts: list[Part] = Field(max_length=2)
        note: str | None = None

    schema = Answer.model_json_schema()
    assert "$defs" in schema  # pydantic's shape, the reason $ref support exists
    rx = gbnf_to_regex(json_grammar_builtin(schema))
    good = [
        {"parts": []},
        {"parts": [{"level": "low", "score": 0}], "note": None},
        {"parts": [{"level": "high", "score": 3}, {"level": "low", "score": 1}], "note": "x"},
    ]
    for inst in good:
        assert rx.fullmatch(compact(inst)), inst
        Answer.model_validate_json(compact(inst))  # and pydantic agrees
    for bad in (
        {"parts": [{"level": "mid", "score": 0}]},
        {"parts": [{"level": "low", "score": 4}]},
        {"parts": [{"level": "low", "score": 1}] * 3},
        {"note": "x"},
    ):
        assert not rx.fullmatch(compact(bad)), bad


def test_recursive_schema_is_unsupported():
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["kids"],
            }
        },
        "$ref": "#/$defs/Node",
    }
    with pytest.raises(UnsupportedSchema, match="recursive"):
        json_grammar_builtin(schema)


def test_json_grammar_prefers_builtin_and_explains_unsupported(monkeypatch):
    assert json_grammar(RISK_SCHEMA) == json_grammar_builtin(RISK_SCHEMA)
    # without llama_cpp, a schema beyond the subset is a clear error
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_grammar", None)
    with pytest.raises(CarebenchError, match="llama-cpp-python"):
        json_grammar({"type": "string", "pattern": "^a+$"})


def test_grammar_for_dispatch():
    assert grammar_for(StructuredSpec(kind="choice", labels=("x", "y"))) == choice_grammar(
        ("x", "y")
    )
    with pytest.raises(CarebenchError):
        grammar_for(StructuredSpec(kind="json"))


@pytest.mark.llamacpp
def test_grammars_parse_in_llama_cpp():
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", exc_type=ImportError)
    from carebench.models.base import PermanentError
    from carebench.models.llamacpp import check_grammar, load_llama, resolve_gguf

    llama = load_llama(resolve_gguf("builtin"))
    texts = [
        choice_grammar(("a", "b", "c", "d")),
        choice_grammar(('quote "x"', "back\\slash", "new\nline")),
        json_grammar_builtin(RISK_SCHEMA),
        json_grammar_builtin(
            {
                "type": "array",
                "items": {"type": "string", "maxLength": 3},
                "minItems": 1,
                "maxItems": 4,
            }
        ),
        json_grammar({"type": "string", "pattern": "^a+$"}),  # llama.cpp's converter
    ]
    for text in texts:
        check_grammar(llama, text)  # raises if llama.cpp's parser rejects it
    with pytest.raises(PermanentError):
        check_grammar(llama, "root ::= undefined-rule\n")
    assert json_grammar({"type": "string", "pattern": "^a+$"}) == llama_grammar.json_schema_to_gbnf(
        json.dumps({"type": "string", "pattern": "^a+$"})
    )

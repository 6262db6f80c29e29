"""Every answer schema carebench sends with ``"strict": true`` keeps to OpenAI's strict
rules (tests/batch/strict_rules.py), live and in batch files alike (one body builder).

The schemas are enumerated from the code, not listed by hand: every pydantic model any
carebench module passes as an answer (to ``JudgeQuestion``, ``ask_json`` or ``json_spec``,
found in the source), every pydantic model defined in carebench at all (whatever shape,
either strict or sent as not strict), the rubric answer models of every built-in
``converse`` rubric, the ``plural`` answer schema of every prompt stage, the guideline
schema and a choice among labels. openai-python's own ``to_strict_json_schema`` is the
independent reference for which objects close and which properties are required.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel

import carebench
from batch.strict_rules import violations
from carebench.models.openai_compat import chat_body
from carebench.models.structured import choice_spec, json_spec, parse_model
from carebench.types import ChatRequest, StructuredSpec, messages

#: a call -> (position, keyword) of its answer-model argument
ANSWER_ARGS = {"JudgeQuestion": (2, "answer"), "ask_json": (4, "answer"), "json_spec": (0, "schema")}
SRC = Path(carebench.__file__).parent


def _modules():
    for info in pkgutil.walk_packages([str(SRC)], "carebench."):
        if info.name.endswith("__main__"):
            continue
        try:
            yield info.name, importlib.import_module(info.name)
        except ImportError:  # an optional dependency (e.g. the annotate web app's) is missing
            continue


def answer_models() -> dict[str, type[BaseModel]]:
    """Every pydantic model a carebench module passes as an answer, found in its source."""
    found: dict[str, type[BaseModel]] = {}
    for name, mod in _modules():
        path = Path(mod.__file__ or "")
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if fn not in ANSWER_ARGS:
                continue
            pos, kw = ANSWER_ARGS[fn]
            arg = node.args[pos] if len(node.args) > pos else next((k.value for k in node.keywords if k.arg == kw),
                                                                       None)
            if isinstance(arg, ast.Name) and isinstance(obj := getattr(mod, arg.id, None), type) \
                    and issubclass(obj, BaseModel):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def all_models() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for _, mod in _modules():
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__.startswith("carebench."):
                out[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return out


def converse_models() -> dict[str, type[BaseModel]]:
    from carebench.converse.judging import answer_model, dimension_model, dimension_questions
    from carebench.converse.rubric import BUILTIN_RUBRICS, load_rubric

    out: dict[str, type[BaseModel]] = {}
    for name in BUILTIN_RUBRICS:
        rubric = load_rubric(name)
        for q in rubric.questions:
            for reasons in (True, False):
                out[f"{name}:{q.id}:{reasons}"] = answer_model(q.labels, reasons)
        for d in rubric.dimensions:
            dq = dimension_questions(rubric, d)
            if dq:
                out[f"{name}:dimension:{d}"] = dimension_model(tuple(x.id for x in dq), tuple(x.labels for x in dq))
    return out


def dict_specs() -> dict[str, StructuredSpec]:
    from carebench.plural.profiles.memalign import _GUIDELINE_SCHEMA
    from carebench.plural.prompting import policy_spec
    from carebench.taxonomy import load_taxonomy

    tax = load_taxonomy()
    out = {f"plural:{stage}": policy_spec(tax, stage) for stage in ("full", "interpret", "policy")}
    out["plural:guidelines"] = StructuredSpec(kind="json", schema_json=json.dumps(_GUIDELINE_SCHEMA), name="g")
    out["choice"] = choice_spec(("a", "b", "c", "d"))
    return out


def sent_schema(spec: StructuredSpec) -> dict:
    """The response_format a request with this spec carries (live and batch: one builder)."""
    body = chat_body("gpt-4o", ChatRequest(messages(("user", "x")), structured=spec), "json_schema")
    return body["response_format"]["json_schema"]


def _objects(schema: dict) -> list[tuple[tuple[str, ...], tuple[str, ...], object]]:
    """(property names, required, additionalProperties) of every object in a schema."""
    found = []

    def walk(s):
        if isinstance(s, dict):
            if "properties" in s:
                found.append((tuple(sorted(s["properties"])), tuple(sorted(s.get("required") or [])),
                               s.get("additionalProperties")))
            for v in s.values():
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    walk(schema)
    return sorted(found, key=repr)


def test_every_answer_model_is_sent_strict_and_keeps_the_rules():
    answers = answer_models()
    # the enumeration reaches the judge verdicts, construct's answers and risk's profile
    assert {"carebench.judging.BinaryVerdict", "carebench.judging.CategoryVerdict",
            "carebench.construct.quality.ConstructionVerdict", "carebench.construct.routing.Sketch",
            "carebench.risk.methods.schema.ClinicalProfile", "carebench.support.probe.Preference"} <= set(answers)
    models = {**answers, **converse_models()}
    for name, model in models.items():
        js = sent_schema(json_spec(model, name=model.__name__.lower()))
        assert js["strict"] is True, name
        assert violations(js["schema"]) == [], (name, violations(js["schema"]))
        # openai-python's own strict form closes the same objects and requires the same properties
        from openai.lib._pydantic import to_strict_json_schema

        assert _objects(js["schema"]) == _objects(to_strict_json_schema(model)), name


def test_every_dict_schema_is_sent_strict_and_keeps_the_rules():
    for name, spec in dict_specs().items():
        js = sent_schema(spec)
        assert js["strict"] is True and violations(js["schema"]) == [], (name, violations(js["schema"]))


def test_any_carebench_model_is_sent_strict_only_in_strict_form():
    from carebench.models.strict_schema import strict_schema

    models = all_models()
    assert len(models) > 20
    strict = 0
    for name, model in models.items():
        schema = model.model_json_schema()
        js = sent_schema(json_spec(schema, name="x"))
        if js["strict"]:
            strict += 1
            assert violations(js["schema"]) == [], (name, violations(js["schema"]))
        else:
            assert strict_schema(schema) is None and js["schema"] == schema, name
    assert strict > 15


def test_hand_made_shapes():
    from carebench.models.strict_schema import strict_schema

    # a map with free keys has no strict form: sent as not strict, unchanged
    free = {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}}
    assert strict_schema(free) is None
    # a $ref with a description is inlined; allOf of one is merged; defaults and lengths dropped
    s = {"type": "object", "properties": {
        "a": {"$ref": "#/$defs/A", "description": "the a"}, "b": {"allOf": [{"$ref": "#/$defs/A"}], "default": None},
        "c": {"type": "string", "maxLength": 5, "default": "x"}}, "required": ["a"],
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}}}}}
    out = strict_schema(s)
    assert violations(out) == []
    assert out["properties"]["a"]["description"] == "the a" and out["properties"]["a"]["required"] == ["x"]
    assert out["properties"]["c"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert strict_schema({"anyOf": [{"type": "object", "properties": {}}]}) is None  # root not an object


@pytest.mark.parametrize("text,rationale", [('{"met": true, "rationale": null}', ""),
                                            ('{"met": false, "rationale": "why"}', "why")])
def test_a_null_optional_field_reads_as_absent(text, rationale):
    from carebench.judging import BinaryVerdict

    got = parse_model(text, BinaryVerdict)
    assert got.ok and got.value.rationale == rationale
    assert not parse_model('{"met": null}', BinaryVerdict).ok  # a required field stays required

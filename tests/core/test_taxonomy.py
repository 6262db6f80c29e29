"""The taxonomy file's rules, checked on hand-written label combinations."""

from __future__ import annotations

import pytest

from carebench.taxonomy import load_contexts, load_taxonomy
from carebench.types import CarebenchError


def test_builtin_taxonomy_has_the_paper_fields_and_codes():
    tx = load_taxonomy()
    assert tx.codes("intent") == ("INTENT_0", "INTENT_1", "INTENT_2", "INTENT_3")
    assert len(tx.codes("function")) == 5 and "FUNCTION_U" in tx.codes("function")
    assert len(tx.codes("response")) == 6
    assert tx.severity["suicidal"].values == (1, 2, 3, 4, 5)
    assert tx.severity["nssi"].intent == "INTENT_2"
    assert tx.normalize("response", "clarify / investigate") == "RESPONSE_1"
    assert tx.normalize("function", "unknown") == "FUNCTION_U"
    assert tx.normalize("intent", "intent 3") == "INTENT_3"
    assert tx.normalize("intent", "nothing like it") is None


@pytest.mark.parametrize(
    ("labels", "broken"),
    [
        ((["INTENT_1"], ["FUNCTION_1"], ["RESPONSE_2"], None, None), []),
        ((["INTENT_2", "INTENT_3"], ["FUNCTION_1", "FUNCTION_4"], ["RESPONSE_1"], 2, 4), []),
        ((["INTENT_3"], ["FUNCTION_2"], ["RESPONSE_1"], None, None), ["suicidal severity is required"]),
        ((["INTENT_1"], ["FUNCTION_2"], ["RESPONSE_1"], 3, None), ["nssi severity given without"]),
        ((["INTENT_3"], ["FUNCTION_2"], ["RESPONSE_1"], None, 7), ["suicidal severity must be one of"]),
        ((["INTENT_1"], ["FUNCTION_U", "FUNCTION_1"], ["RESPONSE_1"], None, None), ["FUNCTION_U"]),
        ((["INTENT_0", "INTENT_1"], ["FUNCTION_1"], ["RESPONSE_2"], None, None), ["INTENT_0"]),
        ((["INTENT_9"], [], ["RESPONSE_2"], None, None), ["unknown code 'INTENT_9'", "function: at least one"]),
    ],
)
def test_cross_field_rules(labels, broken):
    errors = load_taxonomy().validate_policy(*labels)
    assert len(errors) == len(broken)
    for e, expected in zip(errors, broken, strict=True):
        assert expected in e


def test_interpretation_without_response_can_skip_the_response_rule():
    tx = load_taxonomy()
    assert tx.validate_policy(["INTENT_1"], ["FUNCTION_1"], [], require_response=False) == []
    assert tx.validate_policy(["INTENT_1"], ["FUNCTION_1"], []) == ["response: at least one code is required"]


def test_user_taxonomy_file_replaces_the_builtin(tmp_path):
    p = tmp_path / "tx.yaml"
    p.write_text(
        "fields:\n  intent: [{code: I1, name: Distress}]\n  function: [{code: F1, name: Any}]\n"
        "  response: [{code: R1, name: Listen}, {code: R2, name: Refer}]\nrules: {nonempty: [intent]}\n",
        "utf-8",
    )
    tx = load_taxonomy(p)
    assert tx.codes("response") == ("R1", "R2") and tx.severity == {}
    assert tx.validate_policy(["I1"], [], []) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("fields:\n  intent: [{code: I1}]\n", "utf-8")
    with pytest.raises(CarebenchError, match="needs 'code' and 'name'"):
        load_taxonomy(bad)


def test_contexts_have_full_contracts():
    ctx = load_contexts()
    assert set(ctx) == {"forum", "counselor_chat", "platform_search", "triage"}
    text = ctx["triage"].contract_text()
    for part in ("Length:", "Structure:", "Addressee:", "Communicative goal:"):
        assert part in text

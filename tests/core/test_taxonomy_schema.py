"""The policy-answer schema accepts exactly the label combinations the taxonomy accepts.

Reference: ``Taxonomy.validate_policy`` (the rules as written, independent of the
schema). The schema is checked with the ``jsonschema`` package; the grammar built
from it with an independent GBNF reader (tests/gbnf_check.py) here, and with
llama.cpp's own grammar sampler in the embedded-model test below.
"""

from __future__ import annotations

import json
import random
from itertools import chain, combinations, permutations

import jsonschema
import pytest

from carebench.models.grammar import json_grammar_builtin
from carebench.plural.prompting import answer_schema
from carebench.taxonomy import load_taxonomy
from gbnf_check import gbnf_to_regex

TAX = load_taxonomy()
SEVERITIES = (None, 0, 1, 3, 5, 6)

CUSTOM_YAML = """
name: custom
fields:
  intent:
    - {code: A, name: alpha}
    - {code: S, name: self-injury}
    - {code: Z, name: nothing}
  function:
    - {code: F1, name: one}
    - {code: F2, name: two}
  response:
    - {code: R1, name: r one}
    - {code: RX, name: r none}
    - {code: R2, name: r two}
severity:
  nssi: {intent: S, levels: {1: low, 2: mid, 3: high}}
rules:
  exclusive: [Z, RX]
  nonempty: [intent, response]
"""


def _subsets(codes):
    return list(chain.from_iterable(combinations(codes, n) for n in range(len(codes) + 1)))


def _instances(tax, with_response=True, n_random=1500):
    """Label combinations: every intent set x severity pair, every function and response set,
    plus random full combinations (sets written in the taxonomy's order)."""
    intents, functions, responses = (_subsets(tax.codes(f)) for f in ("intent", "function", "response"))
    base = {"intent": [tax.codes("intent")[0]], "function": [tax.codes("function")[0]],
            "response": [tax.codes("response")[0]] if with_response else None}
    out = []
    for i in intents:
        for n in SEVERITIES:
            for s in SEVERITIES:
                out.append({**base, "intent": list(i), "nssi": n, "suicidal": s})
    out += [{**base, "function": list(f), "nssi": None, "suicidal": None} for f in functions]
    if with_response:
        out += [{**base, "response": list(r), "nssi": None, "suicidal": None} for r in responses]
    rng = random.Random(7)
    for _ in range(n_random):
        out.append({"intent": list(rng.choice(intents)), "nssi": rng.choice(SEVERITIES),
                    "suicidal": rng.choice(SEVERITIES), "function": list(rng.choice(functions)),
                    "response": list(rng.choice(responses)) if with_response else None})
    return out


def _answer(inst, with_response=True):
    d = {"intent": inst["intent"], "nssi_severity": inst["nssi"], "suicidal_severity": inst["suicidal"],
         "function": inst["function"]}
    if with_response:
        d["response"] = inst["response"]
    d["rationale"] = "why"
    return d


def _valid(tax, inst, with_response=True):
    return not tax.validate_policy(inst["intent"], inst["function"], inst["response"] or [],
                                   inst["nssi"], inst["suicidal"], require_response=with_response)


def _compact(d):
    return json.dumps(d, separators=(",", ":"))


@pytest.mark.parametrize(("tax", "stage"), [
    (TAX, "full"), (TAX, "interpret"), ("custom", "full"),
], ids=["builtin-full", "builtin-interpret", "custom-taxonomy"])
def test_schema_and_grammar_accept_exactly_the_valid_combinations(tax, stage, tmp_path):
    if tax == "custom":
        path = tmp_path / "tax.yaml"
        path.write_text(CUSTOM_YAML, "utf-8")
        tax = load_taxonomy(path)
    with_response = stage != "interpret"
    schema = answer_schema(tax, stage)
    validator = jsonschema.Draft202012Validator(schema)
    grammar = gbnf_to_regex(json_grammar_builtin(schema))
    n_valid = n_invalid = 0
    for inst in _instances(tax, with_response):
        answer = _answer(inst, with_response)
        valid = _valid(tax, inst, with_response)
        assert validator.is_valid(answer) == valid, (answer, tax.validate_policy(
            inst["intent"], inst["function"], inst["response"] or [], inst["nssi"], inst["suicidal"],
            require_response=with_response))
        assert bool(grammar.fullmatch(_compact(answer))) == valid, answer
        n_valid += valid
        n_invalid += not valid
    assert n_valid > 20 and n_invalid > 100  # both outcomes well represented


def test_sets_are_order_free_in_the_schema_canonical_in_the_grammar_and_never_repeat():
    schema = answer_schema(TAX)
    validator = jsonschema.Draft202012Validator(schema)
    grammar = gbnf_to_regex(json_grammar_builtin(schema))
    inst = {"intent": ["INTENT_1", "INTENT_2", "INTENT_3"], "nssi": 2, "suicidal": 4,
            "function": ["FUNCTION_1", "FUNCTION_3"], "response": ["RESPONSE_1", "RESPONSE_5", "RESPONSE_6"]}
    for intent in permutations(inst["intent"]):
        answer = _answer({**inst, "intent": list(intent)})
        assert validator.is_valid(answer)  # JSON Schema sets have no order
        assert bool(grammar.fullmatch(_compact(answer))) == (list(intent) == inst["intent"])
    repeated = _answer({**inst, "response": ["RESPONSE_1", "RESPONSE_1"]})
    assert TAX.validate_policy(repeated["intent"], repeated["function"], repeated["response"], 2, 4)
    assert not validator.is_valid(repeated)
    assert not grammar.fullmatch(_compact(repeated))
    # the grammar's rationale keeps the length cap
    assert not grammar.fullmatch(_compact({**_answer(inst), "rationale": "x" * 301}))
    assert grammar.fullmatch(_compact({**_answer(inst), "rationale": "x" * 300}))


def test_grammar_is_linear_in_the_vocabulary_not_exponential():
    # one branch per combination of severity-bearing intents (2 scales -> 4), and a
    # constant number of rules per code: a 40-code RESPONSE field stays small
    big = json.loads(json.dumps({
        "name": "big",
        "fields": {f: [{"code": f"{f[0].upper()}{i}", "name": f"{f} {i}"} for i in range(40)]
                   for f in ("intent", "function", "response")},
        "severity": {"nssi": {"intent": "I1", "levels": {1: "a", 2: "b"}},
                     "suicidal": {"intent": "I2", "levels": {1: "a", 2: "b"}}},
    }))
    from carebench.taxonomy import parse_taxonomy

    schema = answer_schema(parse_taxonomy(big))
    assert len(schema["anyOf"]) == 4
    assert len(json_grammar_builtin(schema).splitlines()) < 4 * 3 * 40 + 2 * 3 * 40 + 50


@pytest.mark.llamacpp
def test_llama_cpp_grammar_sampler_accepts_exactly_the_valid_combinations():
    """The same check through llama.cpp's own grammar sampler, which is what constrains decoding."""
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    from carebench.models.llamacpp import check_grammar, load_llama, resolve_gguf
    from gbnf_check import LlamaGrammarCheck

    llama = load_llama(resolve_gguf("builtin"))
    for stage in ("full", "interpret"):
        with_response = stage == "full"
        grammar = json_grammar_builtin(answer_schema(TAX, stage))
        check_grammar(llama, grammar)
        sampler = LlamaGrammarCheck(llama)
        seen = {True: 0, False: 0}
        for inst in _instances(TAX, with_response, n_random=150)[::3]:
            valid = _valid(TAX, inst, with_response)
            assert sampler.accepts(grammar, _compact(_answer(inst, with_response))) == valid, inst
            seen[valid] += 1
        assert seen[True] > 10 and seen[False] > 100
        # and a text that is valid JSON for the old, codes-only schema: INTENT_0 beside INTENT_1
        bad = _answer({"intent": ["INTENT_0", "INTENT_1"], "nssi": None, "suicidal": None,
                       "function": ["FUNCTION_1"], "response": ["RESPONSE_2"]}, with_response)
        assert not sampler.accepts(grammar, _compact(bad))


def _walk(node):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


@pytest.mark.parametrize("stage", ["full", "interpret"])
def test_api_schema_stays_in_the_strict_subset_and_the_grammar_gets_every_rule(stage):
    """API providers get a schema OpenAI's strict mode takes (object root, every property
    required, no uniqueItems / contains / root anyOf), so its capability probe does not drop
    the run to unconstrained JSON; a grammar decoder gets the schema with every rule."""
    from carebench.models.grammar import grammar_for, json_grammar
    from carebench.plural.prompting import api_answer_schema, policy_spec

    spec = policy_spec(TAX, stage)
    api = json.loads(spec.schema_json)
    assert api["type"] == "object" and "anyOf" not in api and "$defs" not in api
    for node in _walk(api):
        if isinstance(node, dict):
            assert not {"uniqueItems", "contains", "allOf", "$ref", "minItems"} & set(node), node
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert sorted(node["required"]) == sorted(node["properties"])
    assert api == api_answer_schema(TAX, stage)
    assert grammar_for(spec) == json_grammar(answer_schema(TAX, stage))
    assert grammar_for(spec) != json_grammar(api)
    # every valid combination passes the API schema; the rules it leaves out are checked
    # after parsing (a severity without its intent passes here and fails validate_policy)
    with_response = stage != "interpret"
    validator = jsonschema.Draft202012Validator(api)
    insts = _instances(TAX, with_response, n_random=300)
    assert all(validator.is_valid(_answer(i, with_response)) for i in insts if _valid(TAX, i, with_response))
    loose = [i for i in insts if not _valid(TAX, i, with_response) and validator.is_valid(_answer(i, with_response))]
    assert loose


def test_a_spec_without_grammar_schema_keeps_its_cache_key():
    """The grammar schema field must not change the cache key of every other structured
    request (cached answers and replay files of earlier runs would all miss)."""
    from carebench.types import ChatRequest, Message, StructuredSpec

    spec = StructuredSpec(kind="json", schema_json='{"type": "object"}', name="x")
    payload = ChatRequest((Message("user", "hi"),), structured=spec).cache_payload()["structured"]
    assert payload == {"kind": "json", "labels": (), "schema_json": '{"type": "object"}', "name": "x"}
    with_grammar = StructuredSpec(kind="json", schema_json="{}", name="x", grammar_schema_json="{}")
    assert ChatRequest((Message("user", "hi"),), structured=with_grammar).cache_payload()["structured"][
        "grammar_schema_json"] == "{}"

"""A zero-shot (E1) policy answer from the embedded 135M model, decoded under the
taxonomy-derived grammar, is a valid label combination.

Before the grammar encoded the cross-field rules, every one of this model's E1
answers on the built-in calibration cases broke one (INTENT_0 beside other
intents, repeated codes, a severity without its intent ...). The reference for
validity is ``Taxonomy.validate_policy``, not the parser under test.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from carebench.datasets.prompts import load_prompts
from carebench.plural.data import builtin_path, load_vocabulary
from carebench.plural.prompting import label_request, parse_prediction


@pytest.mark.llamacpp
def test_builtin_model_e1_answers_are_valid_combinations():
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    from carebench.models.llamacpp import LlamaCppModel

    tax, ctx = load_vocabulary()
    model = LlamaCppModel("llamacpp:builtin")
    prompts = load_prompts(builtin_path("prompts.jsonl"))[:2]
    for prompt in prompts:
        request = label_request(tax, ctx, prompt, max_tokens=400)
        comp = asyncio.run(model.complete(request))
        assert comp.status == "ok", comp
        answer = json.loads(comp.text)  # the grammar's JSON parses as it stands
        assert tax.validate_policy(answer["intent"], answer["function"], answer["response"],
                                   answer["nssi_severity"], answer["suicidal_severity"]) == []
        pred = parse_prediction(comp, tax)
        assert pred.ok and pred.policy.labels() >= set(answer["intent"]) | set(answer["response"])

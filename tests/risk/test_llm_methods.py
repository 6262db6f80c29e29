"""Prompted LLM and schema methods against the loopback stub (and llama.cpp when present).

Expected values are worked by hand from the scripted answers, never read back from
the code under test.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest

from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.models import get_model
from carebench.models.base import ModelSpec
from carebench.risk.answers import parse_final_line as parse_final
from carebench.risk.methods import MethodContext, RiskItem, make_method
from carebench.risk.methods.schema import DIMENSIONS, profile_level
from carebench.types import CarebenchError, Completion, TokenLogprob, Usage
from stub_server import StubReply, StubServer

NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")


def items(n: int = len(NAMES)) -> list[RiskItem]:
    return [
        RiskItem(id=f"i{j}", text=f"post {NAMES[j]} (illustrative)", level=j % 4) for j in range(n)
    ]


def post_of(req) -> str:
    m = re.search(r"<post>\n(.*)\n</post>", req.text, re.DOTALL)
    return m.group(1) if m else req.text


def system_of(req) -> str:
    msgs = req.body["messages"]
    return msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""


def by_post(replies: dict[str, object]):
    """A handler answering by which NAMES word the classified post contains."""

    def handler(req):
        post = post_of(req)
        for key, reply in replies.items():
            if key in post:
                return reply
        raise AssertionError(f"unscripted post {post!r}")

    return handler


def chats(stub) -> list:
    return [r for r in stub.requests if r.path.endswith("/chat/completions")]


@pytest.fixture
def stub():
    with StubServer() as s:
        yield s


def make_ctx(stub, tmp_path, **roles) -> MethodContext:
    run = Run(run_options(cache=tmp_path / "cache.sqlite", progress=False, retries=0))
    models = {"default": get_model(f"openai:stub-model@{stub.base_url}")}
    models.update({r: get_model(f"openai:{m}@{stub.base_url}") for r, m in roles.items()})
    return MethodContext(run=run, models=models)


# -- llm --------------------------------------------------------------------------------
def test_failures_are_counted_never_dropped(stub, tmp_path):
    stub.handler = by_post(
        {
            "alpha": "b",
            "bravo": "Level: c",
            "charlie": "Sorry, I would rather not say.",
            "delta": "",
            "echo": StubReply(content="", finish_reason="content_filter"),
            "foxtrot": StubReply(status=400),
        }
    )
    its = items()
    preds = make_method("llm").predict(its, make_ctx(stub, tmp_path))
    assert [p.item_id for p in preds] == [it.id for it in its]
    assert [p.level for p in preds] == [1, 2, None, None, None, None]
    assert [p.status for p in preds] == [
        "ok",
        "ok",
        "parse_error",
        "empty",
        "content_filter",
        "error",
    ]
    assert Counter(p.status for p in preds)["ok"] == 2
    assert preds[2].raw == "Sorry, I would rather not say." and "error" in preds[2].detail
    assert all(p.method == "llm" for p in preds)
    assert preds[0].n_calls == 1 and preds[0].latency_s > 0 and preds[0].usage.total_tokens > 0


def test_request_shape_and_logprob_probabilities(stub, tmp_path):
    ln = math.log
    stub.handler = by_post(
        {
            # bare letter: the chosen token plus alternatives; "Sure" is not a level
            "alpha": StubReply(
                content="c",
                logprobs=[("c", ln(0.6), {"b": ln(0.2), "d": ln(0.1), "Sure": ln(0.1)})],
            ),
            # JSON-wrapped answer: a decoy "a" sits among the opening token's alternatives
            "bravo": StubReply(
                content='{"answer":"b"}',
                logprobs=[
                    ('{"answer":"', ln(0.99), {"a": ln(0.01)}),
                    ("b", ln(0.7), {"c": ln(0.2), "a": ln(0.1)}),
                    ('"}', 0.0, {}),
                ],
            ),
            "charlie": "d",  # no logprobs from the server
        }
    )
    preds = make_method("llm").predict(items(3), make_ctx(stub, tmp_path))
    assert preds[0].level == 2 and preds[0].probs == pytest.approx([0, 2 / 9, 6 / 9, 1 / 9])
    assert preds[1].level == 1 and preds[1].probs == pytest.approx([0.1, 0.7, 0.2, 0.0])
    assert preds[2].level == 3 and preds[2].probs is None
    body = chats(stub)[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 10
    assert body["temperature"] == 0.0 and body["max_tokens"] == 20
    # issue 10 item 2: the paper's plain one-letter answer by default, no forced JSON
    assert "response_format" not in body and "grammar" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_constrained_decoding_only_when_asked_for(stub, tmp_path):
    """``decoding=json`` forces {"answer": enum}; ``decoding=logits`` reads the most probable
    letter token; both are recorded on every prediction."""
    ln = math.log
    stub.handler = lambda req: (
        StubReply(content='{"answer": "b"}') if req.body.get("response_format")
        else StubReply(content="I would say c", logprobs=[
            ("I", ln(0.5), {"d": ln(0.3), "a": ln(0.1), "b": ln(0.05), "c": ln(0.05)})]))
    ctx = make_ctx(stub, tmp_path)
    js = make_method("llm", decoding="json").predict(items(2), ctx)
    body = chats(stub)[0].body
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["a", "b", "c", "d"]
    assert [p.level for p in js] == [1, 1] and js[0].detail["decoding"] == "json"
    plain = make_method("llm").predict(items(2), ctx)
    assert [p.status for p in plain] == ["parse_error"] * 2  # prose is never guessed from
    lg = make_method("llm", decoding="logits").predict(items(2), ctx)
    # exact letter tokens at the first position: d 0.3, a 0.1, b 0.05, c 0.05 -> d
    assert [p.level for p in lg] == [3, 3] and lg[0].probs == pytest.approx([0.2, 0.1, 0.1, 0.6])
    assert lg[0].detail["decoding"] == "logits"
    with pytest.raises(CarebenchError, match="unknown decoding"):
        make_method("llm", decoding="grammar")


def test_variants_are_distinct_prompts_and_names(stub, tmp_path):
    stub.handler = lambda req: "a"
    ctx = make_ctx(stub, tmp_path)
    one = items(1)
    for name in ("llm", "llm-conservative", "llm-contextual"):
        m = make_method(name)
        assert m.name == name
        assert m.predict(one, ctx)[0].level == 0
    systems = [system_of(r) for r in chats(stub)]
    assert len(set(systems)) == 3
    assert "more severe" in systems[1] and "anything that protects the writer" in systems[2]
    assert all(s.rstrip().endswith("nothing else.") for s in systems)
    assert make_method("llm", variant="contextual").name == "llm-contextual"
    with pytest.raises(CarebenchError, match="variant"):
        make_method("llm", variant="lenient")


def test_rerun_is_served_from_cache(stub, tmp_path):
    stub.handler = lambda req: "b"
    its = items(3)
    first = make_method("llm").predict(its, make_ctx(stub, tmp_path))
    second = make_method("llm").predict(its, make_ctx(stub, tmp_path))  # fresh runner, same cache
    assert len(chats(stub)) == 3
    assert [p.level for p in first] == [p.level for p in second] == [1, 1, 1]


# -- chain of thought ---------------------------------------------------------------------
def test_cot_reads_only_the_final_line_and_truncation_fails(stub, tmp_path):
    stub.handler = by_post(
        {
            "alpha": "1. Personal. 2. Active, pills at hand.\nFINAL: c",
            "bravo": "At first I'd say FINAL: b, but the farewell changes it.\nFINAL: d",
            "charlie": "I think this is b.",
            "delta": StubReply(content="1. Personal.\nFINAL: c", finish_reason="length"),
            "echo": "FINAL: e",
        }
    )
    preds = make_method("llm-cot").predict(items(5), make_ctx(stub, tmp_path))
    assert [p.level for p in preds] == [2, 3, None, None, None]
    assert [p.status for p in preds] == ["ok", "ok", "parse_error", "truncated", "parse_error"]
    body = chats(stub)[0].body
    assert body["max_tokens"] == 1024 and "response_format" not in body
    assert "FINAL: <letter>" in system_of(chats(stub)[0])
    assert "nothing else" not in system_of(chats(stub)[0])
    assert parse_final("final = (b)") == ("b", None)


# -- in-process choice probabilities (llama.cpp style) --------------------------------------
class _FakeLocal:
    """In-process model with ``choice_probabilities`` (the llama.cpp provider's extra)."""

    default_concurrency = 1

    def __init__(self, answers: dict[str, str], probs: dict[str, float], logprobs=None):
        self.spec = ModelSpec("llamacpp", "fake")
        self.answers, self.probs, self.logprobs = answers, probs, logprobs or {}
        self.asked: list[str] = []

    async def complete(self, request):
        post = request.messages[-1].content
        key = next(k for k in self.answers if k in post)
        return Completion(
            text=self.answers[key],
            finish_reason="stop",
            usage=Usage(10, 1),
            latency_s=0.01,
            logprobs=self.logprobs.get(key),
        )

    async def choice_probabilities(self, request, labels):
        assert labels == ("a", "b", "c", "d")
        self.asked.append(request.messages[-1].content)
        return dict(self.probs)

    async def aclose(self):
        pass


def test_choice_probabilities_never_replace_a_failed_parse():
    model = _FakeLocal({"alpha": "b", "bravo": "no idea"}, {"a": 1.0, "b": 2.0, "c": 5.0, "d": 2.0})
    ctx = MethodContext(run=Run(run_options(no_cache=True, progress=False)), models={"default": model})
    preds = make_method("llm").predict(items(2), ctx)
    assert preds[0].level == 1 and preds[0].probs == pytest.approx([0.1, 0.2, 0.5, 0.2])
    assert preds[1].level is None and preds[1].status == "parse_error" and preds[1].probs is None
    assert preds[1].detail["argmax"] == 2 and preds[1].detail["probs"] == pytest.approx(
        [0.1, 0.2, 0.5, 0.2]
    )


def test_choice_probabilities_only_where_logprobs_miss_a_letter():
    ln = math.log
    # " A" is not a letter token a grammar-bound answer can produce: it must not count as a
    full = (TokenLogprob("b", ln(0.4), {"a": ln(0.1), "c": ln(0.3), "d": ln(0.2), " A": ln(0.5)}),)
    partial = (TokenLogprob("b", ln(0.6), {"c": ln(0.2)}),)  # a, d not among the alternatives
    model = _FakeLocal(
        {"alpha": "b", "bravo": "b"},
        {"a": 1.0, "b": 6.0, "c": 2.0, "d": 1.0},
        logprobs={"alpha": full, "bravo": partial},
    )
    ctx = MethodContext(run=Run(run_options(no_cache=True, progress=False)), models={"default": model})
    preds = make_method("llm").predict(items(2), ctx)
    assert preds[0].probs == pytest.approx([0.1, 0.4, 0.3, 0.2])  # from the logprobs, no extra call
    assert preds[1].probs == pytest.approx([0.1, 0.6, 0.2, 0.1])  # exact distribution asked for
    assert len(model.asked) == 1 and "bravo" in model.asked[0]


# -- schema -----------------------------------------------------------------------------
def profile(**over: int) -> dict[str, int]:
    p = dict.fromkeys(DIMENSIONS, 0)
    p.update(over)
    return p


@pytest.mark.parametrize(
    ("dims", "level"),
    [
        ({}, 0),
        ({"hopelessness": 1}, 0),
        ({"hopelessness": 2}, 1),
        ({"ideation_presence": 1}, 1),
        ({"ideation_presence": 2}, 1),
        ({"ideation_presence": 2, "temporality": 2}, 2),
        ({"ideation_presence": 2, "linguistic_urgency": 2}, 2),
        ({"ideation_presence": 3}, 2),
        ({"plan_specificity": 1}, 2),
        ({"temporality": 3, "plan_specificity": 1}, 2),
        ({"temporality": 3, "plan_specificity": 2}, 3),
        ({"prior_attempts": 1, "ideation_presence": 1}, 1),
        ({"prior_attempts": 2}, 3),
        ({"linguistic_urgency": 3}, 3),
        ({"third_party_context": 3, "ideation_presence": 3, "prior_attempts": 3}, 0),
        ({"third_party_context": 2, "ideation_presence": 1}, 1),
    ],
)
def test_profile_level_rule(dims, level):
    assert profile_level(profile(**dims)) == level


def test_schema_validates_json_and_keeps_the_profile(stub, tmp_path):
    good = profile(ideation_presence=1, hopelessness=2, protective_factors=1)
    fenced = "```json\n" + json.dumps(profile(prior_attempts=3, linguistic_urgency=3)) + "\n```"
    missing = {k: v for k, v in profile().items() if k != "temporality"}
    stub.handler = by_post(
        {
            "alpha": json.dumps(good),
            "bravo": json.dumps(profile(plan_specificity=4)),
            "charlie": "The post shows passive ideation.",
            "delta": json.dumps(missing),
            "echo": fenced,
            "foxtrot": json.dumps({**good, "mood": 2}),
        }
    )
    preds = make_method("schema").predict(items(), make_ctx(stub, tmp_path))
    assert [p.level for p in preds] == [1, None, None, None, 3, None]
    assert [p.status for p in preds] == [
        "ok",
        "parse_error",
        "parse_error",
        "parse_error",
        "ok",
        "parse_error",
    ]
    assert preds[0].profile == good and preds[1].profile is None
    assert "plan_specificity" in preds[1].detail["error"]
    assert "temporality" in preds[3].detail["error"]
    assert preds[4].profile["prior_attempts"] == 3
    body = chats(stub)[0].body
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == set(DIMENSIONS) == set(schema["required"])
    assert all(schema["properties"][d]["enum"] == [0, 1, 2, 3] for d in DIMENSIONS)


# -- embedded model smoke test ---------------------------------------------------------------
@pytest.mark.llamacpp
def test_llamacpp_builtin_runs_llm_and_schema(tmp_path):
    pytest.importorskip("llama_cpp")
    pytest.importorskip("carebench.models.llamacpp")
    from carebench.risk.data import load_builtin

    model = get_model("llamacpp:builtin", reuse_prefix=True)  # shared rubric prefix: faster
    ctx = MethodContext(
        run=Run(run_options(cache=tmp_path / "c.sqlite", progress=False)),
        models={"default": model},
    )
    its = list(load_builtin("sample").items)[:4]
    for name in ("llm", "schema"):
        preds = make_method(name).predict(its, ctx)
        assert [p.item_id for p in preds] == [it.id for it in its]
        for p in preds:
            assert p.status in ("ok", "parse_error", "empty", "truncated")
            assert (p.level is None) == (p.status != "ok")
            assert p.n_calls == 1
        if name == "schema":
            assert all(p.profile is not None for p in preds if p.status == "ok")
        else:  # the in-process model gives the exact distribution over the four letters
            assert any(p.status == "ok" for p in preds)
            for p in preds:
                if p.status not in ("ok", "parse_error"):
                    continue  # plain answers (the default) may run on as prose
                probs = p.probs if p.status == "ok" else p.detail.get("probs")
                assert probs is not None and sum(probs) == pytest.approx(1.0) and min(probs) > 0


def test_budget_stop_is_a_recorded_outcome(stub, tmp_path, price_per_call):
    price_per_call(1.0, "stub-model")
    stub.handler = lambda req: "a"
    run = Run(run_options(cache=tmp_path / "c.sqlite", progress=False, budget=0.5))  # no call fits: each may cost $1
    ctx = MethodContext(
        run=run, models={"default": get_model(f"openai:stub-model@{stub.base_url}")}
    )
    preds = make_method("llm").predict(items(3), ctx)
    assert [(p.level, p.status, p.n_calls) for p in preds] == [(None, "budget", 0)] * 3
    assert chats(stub) == []

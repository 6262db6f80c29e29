"""Multi-agent aggregation and stacking against the loopback stub, hand-worked."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.models import get_model
from carebench.risk.methods import MethodContext, RiskItem, RiskPrediction, make_method
from carebench.risk.methods.ensembles import (
    Evidence,
    StackedMethod,
    calibrated_level,
    features,
    majority_vote,
    moderation_level,
)
from carebench.risk.methods.schema import DIMENSIONS
from carebench.types import Usage
from stub_server import StubReply, StubServer

SH = ("self_harm", "self_harm_intent", "self_harm_instructions")


def component_of(body: dict) -> str:
    system = body["messages"][0]["content"]
    if "structured clinical risk profile" in system:
        return "schema"
    if "make the final call" in system:
        return "adjudicator"
    if "Erring on the side of safety" in system:
        return "conservative"
    if "look at the context around" in system:
        return "contextual"
    return "clinical"


def post_of(req) -> str:
    m = re.search(r"<post>\n(.*?)\n</post>", req.text, re.DOTALL)
    return m.group(1) if m else req.text


def profile(**over: int) -> str:
    p = dict.fromkeys(DIMENSIONS, 0)
    p.update(over)
    return json.dumps(p)


def scripted(script: dict[str, dict[str, object]], delays: dict[str, float] | None = None):
    """Handler: ``script[post word][component]`` answers each chat call."""

    def handler(req):
        comp = component_of(req.body)
        key = post_of(req).split()[0]
        reply = script[key][comp]
        if isinstance(reply, str):
            reply = StubReply(content=reply)
        if delays and comp in delays:
            reply.delay = delays[comp]
        return reply

    return handler


@pytest.fixture
def stub():
    with StubServer() as s:
        yield s


def make_ctx(stub, tmp_path, train=None, **roles) -> MethodContext:
    run = Run(run_options(cache=tmp_path / "c.sqlite", progress=False, retries=0))
    models = {"default": get_model(f"openai:stub-model@{stub.base_url}")}
    models.update({r: get_model(spec.format(url=stub.base_url)) for r, spec in roles.items()})
    return MethodContext(run=run, models=models, train=train)


def n_chats(stub) -> int:
    return sum(r.path.endswith("/chat/completions") for r in stub.requests)


# -- vote ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("votes", "level"),
    [
        ([0, 1, 2], 2),  # three-way tie: highest
        ([1, 1, 3], 1),  # majority beats severity
        ([3, 2, 2], 2),
        ([0, None, 3], 3),  # a failed voter abstains; 1-1 tie: higher
        ([None, 1, None], 1),
        ([None, None, None], None),
        ([2, 2, 2], 2),
    ],
)
def test_majority_ties_to_higher(votes, level):
    assert majority_vote(votes) == level


VOTE_SCRIPT = {
    "alpha": {"clinical": "a", "conservative": "b", "contextual": "c"},
    "bravo": {"clinical": "b", "conservative": "b", "contextual": "d"},
    "charlie": {"clinical": "a", "conservative": "unsure", "contextual": "d"},
    "delta": {"clinical": "unsure", "conservative": "", "contextual": "no idea"},
    "echo": {"clinical": "d", "conservative": "c", "contextual": "c"},
}


def vote_items() -> list[RiskItem]:
    return [
        RiskItem(id=f"i{j}", text=f"{w} post (illustrative)", level=j % 4)
        for j, w in enumerate(VOTE_SCRIPT)
    ]


def test_vote_end_to_end_shares_cache_and_takes_critical_path(stub, tmp_path):
    stub.handler = scripted(VOTE_SCRIPT, delays={"conservative": 0.05})
    items = vote_items()
    ctx = make_ctx(stub, tmp_path)
    singles = {
        n: make_method(n).predict(items, ctx) for n in ("llm", "llm-conservative", "llm-contextual")
    }
    made = n_chats(stub)
    assert made == 3 * len(items)
    preds = make_method("vote", voters="variants").predict(items, ctx)
    assert n_chats(stub) == made  # every voter call was the standalone method's cached call
    assert [p.level for p in preds] == [2, 1, 3, None, 2]
    assert preds[3].status == "parse_error" and preds[3].detail["vote_status"] == [
        "parse_error",
        "empty",
        "parse_error",
    ]
    assert preds[2].detail["votes"] == ["a", None, "d"]
    for i, p in enumerate(preds):
        comps = [singles[n][i] for n in singles]
        assert p.latency_s == pytest.approx(max(c.latency_s for c in comps))  # parallel voters
        assert p.cost_usd == pytest.approx(sum(c.cost_usd for c in comps))
        assert p.usage.total_tokens == sum(c.usage.total_tokens for c in comps)
        assert p.n_calls == 3
    assert preds[0].latency_s >= 0.05


def test_vote_over_three_models_as_roles(stub, tmp_path):
    answers = {"m1": "b", "m2": "c", "m3": "c"}

    def handler(req):
        assert component_of(req.body) == "clinical"
        return answers[req.body["model"]]

    stub.handler = handler
    ctx = make_ctx(stub, tmp_path, **{f"voter{j}": f"openai:m{j}@{{url}}" for j in (1, 2, 3)})
    preds = make_method("vote").predict(vote_items()[:2], ctx)
    assert [p.level for p in preds] == [2, 2]
    assert sorted({r.body["model"] for r in stub.requests}) == ["m1", "m2", "m3"]


# -- schema-calibrated ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "mod", "level"),
    [
        (1, None, 1),
        (1, 2, 1),
        (1, 3, 2),
        (0, 3, 1),
        (3, 0, 2),
        (3, 1, 2),
        (2, 3, 2),
        (2, 0, 1),
        (0, 0, 0),
    ],
)
def test_calibrate_rule(schema, mod, level):
    assert calibrated_level(schema, mod) == level


@pytest.mark.parametrize(
    ("scores", "level"),
    [
        ((0.05, 0.02, 0.9), 0),
        ((0.02, 0.10, 0.0), 1),
        ((0.34, 0.2, 0.0), 1),
        ((0.2, 0.5, 0.0), 2),
        ((0.7, 0.0, 0.0), 3),
    ],
)
def test_moderation_level_uses_fixed_thresholds_on_max_signal(scores, level):
    assert moderation_level(dict(zip(SH, scores, strict=True))) == level


def test_schema_calibrated_with_columns_and_moderation_model(stub, tmp_path):
    script = {
        "alpha": {"schema": profile(ideation_presence=1)},  # schema 1, moderation 3 -> 2
        "bravo": {"schema": profile(plan_specificity=2)},  # schema 2, moderation 3 -> 2
        "charlie": {"schema": profile(prior_attempts=3)},  # schema 3, moderation 0 -> 2
        "delta": {"schema": "not json"},  # schema failed -> failure
        "echo": {"schema": profile(hopelessness=2)},  # schema 1, model moderation 3 -> 2
    }
    chat = scripted(script)

    def handler(req):
        if req.path.endswith("/moderations"):
            assert req.text.startswith("echo")
            return StubReply(
                moderation={
                    "self-harm": 0.9,
                    "self-harm/intent": 0.2,
                    "self-harm/instructions": 0.0,
                }
            )
        return chat(req)

    stub.handler = handler
    cols = {
        "alpha": (0.8, 0.1, 0.0),
        "bravo": (0.75, 0.1, 0.0),
        "charlie": (0.01, 0.02, 0.0),
        "delta": (0.5, 0.5, 0.0),
    }
    items = [
        RiskItem(
            id=w,
            text=f"{w} post",
            level=1,
            scores=dict(zip(SH, cols[w], strict=True)) if w in cols else {},
        )
        for w in script
    ]
    ctx = make_ctx(stub, tmp_path, moderation="openai-moderation:omni-moderation-latest@{url}")
    preds = make_method("schema-calibrated").predict(items, ctx)
    assert [p.level for p in preds] == [2, 2, 2, None, 2]
    assert preds[3].status == "parse_error"
    assert preds[0].detail["schema_level"] == 1 and preds[0].detail["moderation_level"] == 3
    assert preds[0].detail["moderation_source"] == "column"
    assert preds[4].detail["moderation_source"].startswith("openai-moderation:")
    assert preds[4].n_calls == 2 and preds[0].n_calls == 1
    assert preds[2].profile["prior_attempts"] == 3
    # the moderation request is the moderation baseline's own (shared cache)
    mod = make_method("moderation-fixed").predict(items[4:], ctx)
    assert mod[0].level == 3 and sum(r.path.endswith("/moderations") for r in stub.requests) == 1


# -- adjudicated ---------------------------------------------------------------------------
def test_adjudicator_sees_all_evidence_and_decides(stub, tmp_path):
    script = {
        "alpha": {
            "clinical": "b",
            "conservative": "c",
            "contextual": "c",
            "schema": profile(ideation_presence=2, temporality=2),
            "adjudicator": "c",
        },
        "bravo": {
            "clinical": "a",
            "conservative": "b",
            "contextual": "b",
            "schema": "oops",
            "adjudicator": "maybe",
        },
    }
    stub.handler = scripted(script, delays={"schema": 0.2, "adjudicator": 0.15})
    items = [
        RiskItem(
            id=w, text=f"{w} post", level=2, scores=dict(zip(SH, (0.4, 0.3, 0.01), strict=True))
        )
        for w in script
    ]
    preds = make_method("adjudicated", voters="variants").predict(items, make_ctx(stub, tmp_path))
    assert [p.level for p in preds] == [2, None]
    assert [p.status for p in preds] == ["ok", "parse_error"]
    adj = [
        r
        for r in stub.requests
        if r.path.endswith("/chat/completions") and component_of(r.body) == "adjudicator"
    ]
    assert len(adj) == 2
    text = adj[0].text
    assert '"ideation_presence": 2' in text and '"temporality": 2' in text
    assert "self_harm 0.400, self_harm_intent 0.300, self_harm_instructions 0.010" in text
    assert (
        "classifier 1: b (Ideation); classifier 2: c (Behavior); classifier 3: c (Behavior)" in text
    )
    assert "not available (parse_error)" in adj[1].text
    assert preds[0].profile is not None and preds[0].profile["temporality"] == 2
    assert preds[0].n_calls == 5  # three voters, the profiler, the adjudicator
    # components run side by side (slowest: schema 0.2 s), then the adjudicator (0.15 s)
    assert 0.35 <= preds[0].latency_s < 0.35 + 0.3


def test_critical_path_and_sums_are_exact():
    from carebench.risk.methods.ensembles import _finish

    def pred(lat, cost, tok):
        return RiskPrediction("x", "m", 1, latency_s=lat, cost_usd=cost, usage=Usage(tok, 1), n_calls=1)

    ev = Evidence(
        votes=[pred(0.5, 0.01, 10), pred(1.5, 0.02, 20), pred(0.2, 0.03, 30)],
        schema=pred(1.0, 0.04, 40),
    )
    out = _finish(RiskPrediction("x", "vote", 1), ev)
    assert out.latency_s == pytest.approx(1.5) and out.cost_usd == pytest.approx(0.10)
    assert out.usage == Usage(100, 4) and out.n_calls == 4


# -- stacked -------------------------------------------------------------------------------
def stack_corpus(n_per_level: int = 5) -> tuple[list[RiskItem], dict]:
    """Items whose moderation scores are unique, so a feature row identifies its item."""
    rng = np.random.default_rng(7)
    items, script = [], {}
    for j in range(4 * n_per_level):
        level = j % 4
        word = f"w{j:02d}"
        noisy = int(np.clip(level + rng.integers(-1, 2), 0, 3))
        script[word] = {
            "clinical": "abcd"[level] if j % 3 else "abcd"[noisy],
            "conservative": "abcd"[min(3, level + 1)] if j % 2 else "abcd"[level],
            "contextual": "abcd"[noisy],
            "schema": profile(
                ideation_presence=min(3, level), prior_attempts=3 if level == 3 and j % 2 else 0
            ),
        }
        scores = dict(zip(SH, (0.2 * level + 0.001 * j, 0.1 + 0.003 * j, 0.0005 * j), strict=True))
        items.append(RiskItem(id=word, text=f"{word} post", level=level, scores=scores))
    return items, script


def test_stacked_is_out_of_fold(stub, tmp_path, monkeypatch):
    items, script = stack_corpus()
    stub.handler = scripted(script)
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    original = StackedMethod._fit_predict

    def spy(self, X_tr, y_tr, X_te, seed):
        seen.append((X_tr.copy(), X_te.copy()))
        return original(self, X_tr, y_tr, X_te, seed)

    monkeypatch.setattr(StackedMethod, "_fit_predict", spy)
    ctx = make_ctx(stub, tmp_path)
    preds = make_method("stacked", voters="variants").predict(items, ctx)
    assert len(seen) == 5 and all(p.status == "ok" for p in preds)
    predicted = []
    for X_tr, X_te in seen:
        train_rows = {tuple(r) for r in X_tr}
        assert not any(
            tuple(r) in train_rows for r in X_te
        )  # no item predicted by a model that saw it
        predicted += [tuple(r) for r in X_te]
    assert len(predicted) == len(set(predicted)) == len(items)  # each item exactly once

    # independent reference: stratified 5-fold, seed 42, scaled multinomial LR, balanced
    from carebench.risk.methods.ensembles import Components

    X = np.vstack([features(e) for e in Components(voters="variants").gather(items, ctx)])
    y = np.array([it.level for it in items])
    expected = np.zeros((len(items), 4))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=42).split(X, y):
        clf = make_pipeline(
            StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=2000)
        )
        clf.fit(X[tr], y[tr])
        expected[te] = clf.predict_proba(X[te])
    got = np.array([p.probs for p in preds])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert [p.level for p in preds] == expected.argmax(1).tolist()


def test_stacked_transfer_fits_on_train_only(stub, tmp_path, monkeypatch):
    train, script = stack_corpus()
    evaluated = [
        RiskItem(id=f"e{j}", text=f"w{j:02d} post", level=j % 4) for j in range(4)
    ]  # same answers
    stub.handler = scripted(script)
    shapes = []
    original = StackedMethod._fit_predict

    def spy(self, X_tr, y_tr, X_te, seed):
        shapes.append((X_tr.shape[0], X_te.shape[0], sorted(set(y_tr.tolist()))))
        return original(self, X_tr, y_tr, X_te, seed)

    monkeypatch.setattr(StackedMethod, "_fit_predict", spy)
    preds = make_method("stacked", voters="variants").predict(evaluated, make_ctx(stub, tmp_path, train=train))
    assert shapes == [(20, 4, [0, 1, 2, 3])]
    assert [p.detail["fold"] for p in preds] == [-1] * 4 and all(p.level is not None for p in preds)


def test_stacked_all_components_failed_is_a_failure(stub, tmp_path):
    items, script = stack_corpus()
    bad = items[0].text.split()[0]
    script[bad] = dict.fromkeys(("clinical", "conservative", "contextual", "schema"), "???")
    items[0] = RiskItem(
        id=items[0].id, text=items[0].text, level=items[0].level
    )  # no moderation columns
    stub.handler = scripted(script)
    preds = make_method("stacked", voters="variants").predict(items, make_ctx(stub, tmp_path))
    assert preds[0].level is None and preds[0].status == "parse_error"
    assert all(p.level is not None for p in preds[1:])


def test_profiler_call_is_shared_with_the_schema_method(stub, tmp_path):
    stub.handler = scripted({"alpha": {"schema": profile(plan_specificity=1)}})
    items = [
        RiskItem(
            id="x", text="alpha post", level=2, scores=dict(zip(SH, (0.5, 0.4, 0.0), strict=True))
        )
    ]
    ctx = make_ctx(stub, tmp_path)
    alone = make_method("schema").predict(items, ctx)
    calibrated = make_method("schema-calibrated").predict(items, ctx)
    assert n_chats(stub) == 1
    assert alone[0].level == calibrated[0].level == 2 and calibrated[0].profile == alone[0].profile


def test_named_voter_roles_must_exist(stub, tmp_path):
    from carebench.types import CarebenchError

    with pytest.raises(CarebenchError, match="voter2"):
        make_method("vote", voters=["voter1", "voter2"]).predict(
            vote_items()[:1], make_ctx(stub, tmp_path, voter1="openai:m1@{url}")
        )
    with pytest.raises(CarebenchError, match="variant"):
        make_method("vote", variants=["clinical", "lenient"])
    assert stub.requests == []


def test_ensemble_models_can_be_named_inline(stub, tmp_path):
    answers = {"m1": "a", "m2": "d", "m3": "d", "judge": "b"}
    stub.handler = lambda req: (
        answers[req.body["model"]] if component_of(req.body) != "schema" else profile()
    )
    models = {f"voter{j}": f"openai:m{j}@{stub.base_url}" for j in (1, 2, 3)}
    vote = make_method("vote", models=models).predict(vote_items()[:1], make_ctx(stub, tmp_path))
    assert vote[0].level == 3 and vote[0].detail["voters"] == [
        "llm@voter1",
        "llm@voter2",
        "llm@voter3",
    ]
    adj = make_method(
        "adjudicated", models={**models, "adjudicator": f"openai:judge@{stub.base_url}"}
    )
    assert adj.predict(vote_items()[:1], make_ctx(stub, tmp_path))[0].level == 1
    assert {r.body["model"] for r in stub.requests} == {"m1", "m2", "m3", "judge", "stub-model"}

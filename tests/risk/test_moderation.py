"""Moderation baselines: thresholds worked by hand, calibration out-of-fold, model scores."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.risk.methods import MethodContext, RiskItem, make_method
from carebench.risk.methods import moderation as mod
from carebench.types import CarebenchError


def _item(i: int, level: int, sh: float, si: float, ins: float = 0.0) -> RiskItem:
    return RiskItem(f"i{i}", f"text {i}", level,
                    scores={"self_harm": sh, "self_harm_intent": si, "self_harm_instructions": ins})


def test_fixed_thresholds_by_hand():
    # signal = max(self_harm, self_harm_intent); cuts 0.10 / 0.35 / 0.70, a score equal to a
    # cut moves up (>=)
    cases = [((0.05, 0.09), 0), ((0.02, 0.10), 1), ((0.349, 0.2), 1), ((0.35, 0.0), 2),
             ((0.1, 0.69), 2), ((0.7, 0.1), 3), ((0.2, 0.95), 3)]
    items = [_item(i, 0, sh, si, ins=0.99) for i, ((sh, si), _) in enumerate(cases)]
    preds = make_method("moderation-fixed").predict(items, MethodContext(None, {}))
    assert [p.level for p in preds] == [lvl for _, lvl in cases]
    assert preds[3].detail["thresholds"] == [0.10, 0.35, 0.70]
    assert preds[4].detail["signal"] == pytest.approx(0.69)


def test_weighted_signal_and_explicit_thresholds_by_hand():
    s = {"self_harm": 0.4, "self_harm_intent": 0.2, "self_harm_instructions": 1.0}
    assert mod.weighted_signal(s) == pytest.approx(0.5 * 0.4 + 0.35 * 0.2 + 0.15 * 1.0)  # 0.42
    items = [_item(0, 0, 0.4, 0.2, 1.0), _item(1, 0, 0.1, 0.1, 0.0), _item(2, 0, 0.9, 0.9, 0.9)]
    # combined: 0.42, 0.085, 0.9 -> with cuts 0.1/0.3/0.6: levels 2, 0, 3
    preds = make_method("moderation-weighted", thresholds=[0.1, 0.3, 0.6]).predict(
        items, MethodContext(None, {}))
    assert [p.level for p in preds] == [2, 0, 3]
    with pytest.raises(CarebenchError, match="three increasing"):
        make_method("moderation-weighted", thresholds=[0.5, 0.2, 0.9])


def test_quantile_matched_recalibration_sends_same_shares():
    fixed = np.array([0.05, 0.2, 0.3, 0.5, 0.6, 0.8, 0.9, 0.95])
    # fixed cuts send 1 item below 0.10, 2 more below 0.35, 2 more below 0.70, 3 above
    combined = np.arange(8) / 10.0  # 0.0 .. 0.7, same order
    th = mod.quantile_matched_thresholds(fixed, combined)
    assert list(mod.cut(combined, th)) == list(mod.cut(fixed, mod.FIXED_THRESHOLDS))
    assert list(mod.cut(fixed, mod.FIXED_THRESHOLDS)) == [0, 1, 1, 2, 2, 3, 3, 3]


def test_fit_thresholds_recovers_separating_cuts():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 25)
    signal = y * 0.25 + rng.uniform(0.01, 0.2, size=y.size)  # disjoint bands per level
    th = mod.fit_thresholds(signal, y)
    assert (mod.cut(signal, th) == y).all()


def test_calibrated_thresholds_fitted_on_training_folds_only(monkeypatch):
    rng = np.random.default_rng(1)
    items = [_item(i, i % 4, float(rng.uniform(0, 1)), float(rng.uniform(0, 1))) for i in range(40)]
    seen: list[set[float]] = []
    real = mod.fit_thresholds

    def spy(signal, y, *a, **k):
        seen.append({round(float(v), 12) for v in signal})
        return real(signal, y, *a, **k)

    monkeypatch.setattr(mod, "fit_thresholds", spy)
    preds = make_method("moderation-calibrated").predict(items, MethodContext(None, {}, seed=42))
    assert len(seen) == 5
    for p, it in zip(preds, items, strict=True):
        fold = p.detail["fold"]
        own = round(mod.weighted_signal(it.scores), 12)
        assert own not in seen[fold]  # the item's score was not in its fold's training signal
        assert p.level == int(mod.cut([own], p.detail["thresholds"])[0])


def test_scores_from_a_moderation_model_via_the_run(tmp_path):
    from carebench.engine.options import run_options
    from carebench.engine.run import Run
    from carebench.models import get_model
    from stub_server import StubReply, StubServer

    items = [RiskItem("a", "calm words", 0), RiskItem("b", "dark words", 3)]
    with StubServer() as stub:
        stub.on_text("calm", StubReply(moderation={"self-harm": 0.05, "self-harm/intent": 0.01}))
        stub.on_text("dark", StubReply(moderation={"self-harm": 0.8, "self-harm/intent": 0.4,
                                                   "self-harm/instructions": 0.1}))
        model = get_model(f"openai-moderation:omni-moderation-latest@{stub.base_url}")
        ctx = MethodContext(Run(run_options(cache=tmp_path / "c.db", progress=False)), {"moderation": model})
        fixed = make_method("moderation-fixed")
        assert len(fixed.calls(items, ctx)) == 2
        preds = fixed.predict(items, ctx)
        weighted = make_method("moderation-weighted", thresholds=[0.1, 0.35, 0.5]).predict(items, ctx)
        assert stub.count() == 2  # the second method shared the cached calls
    assert [p.level for p in preds] == [0, 3]
    assert preds[1].n_calls == 1 and preds[1].detail["score_source"].startswith("openai-moderation")
    assert weighted[1].detail["signal"] == pytest.approx(0.5 * 0.8 + 0.35 * 0.4 + 0.15 * 0.1)
    assert [p.level for p in weighted] == [0, 3]
    with pytest.raises(CarebenchError, match="moderation-model"):
        make_method("moderation-fixed").predict(items, MethodContext(None, {}))

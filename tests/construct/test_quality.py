"""Q and gate-first selection, worked by hand."""

from __future__ import annotations

import pytest

from carebench.construct.quality import ConstructionVerdict, Outcome, quality_q, selected, summarize


def _v(sev=True, leak=True, fmt=True, f=4, p=4, a=4, c=4, n=4):
    return ConstructionVerdict(severity_preserved=sev, no_leakage=leak, format_ok=fmt, factual=f,
                               persona_fit=p, style=a, context_fit=c, naturalness=n)


def test_q_weights():
    # 0.25*5 + 0.25*4 + 0.20*3 + 0.20*2 + 0.10*1 = 1.25 + 1.0 + 0.6 + 0.4 + 0.1 = 3.35
    assert quality_q({"factual": 5, "persona_fit": 4, "style": 3, "context_fit": 2, "naturalness": 1}) == pytest.approx(3.35)


def test_gate_first_selection():
    outs = []
    # "best": all 5s, but 5 of 20 fail format (25% > 20%) -> excluded despite the best Q
    outs += [Outcome("best", _v(fmt=i >= 5, f=5, p=5, a=5, c=5, n=5)) for i in range(20)]
    # "edge": exactly 1 of 20 fails severity (5%) and 4 of 20 fail format (20%) -> passes
    outs += [Outcome("edge", _v(sev=i != 0, fmt=i >= 4, f=4, p=4, a=4, c=4, n=4)) for i in range(20)]
    # "leaky": 2 of 20 leak (10%) -> excluded
    outs += [Outcome("leaky", _v(leak=i >= 2, f=3, p=3, a=3, c=3, n=3)) for i in range(20)]
    # "plain": clean, Q = 0.25*3 + 0.25*3 + 0.2*3 + 0.2*3 + 0.1*5 = 3.2
    outs += [Outcome("plain", _v(f=3, p=3, a=3, c=3, n=5)) for _ in range(20)]
    table = summarize(outs)
    by = {r.config: r for r in table}
    assert by["best"].excluded_by == ["format"] and by["best"].q == pytest.approx(5.0)
    assert by["edge"].passed and by["edge"].fail_rate["severity_preserved"] == pytest.approx(0.05)
    assert by["edge"].fail_rate["format_ok"] == pytest.approx(0.20)
    assert by["leaky"].excluded_by == ["leakage"]
    assert selected(table) == ["edge", "plain"]  # ranked by Q: 4.0 then 3.2
    assert [r.rank for r in table[:2]] == [1, 2]


def test_failed_rewrites_count_as_format_and_unjudged_are_left_out():
    outs = [Outcome("m", _v()) for _ in range(8)]
    outs += [Outcome("m", None, rewrite_ok=False) for _ in range(2)]  # 2 of 10 unusable: 20% format
    outs += [Outcome("m", None) for _ in range(5)]  # judge never answered
    (row,) = summarize(outs)
    assert row.fail_rate["format_ok"] == pytest.approx(0.2) and row.passed
    assert row.fail_rate["severity_preserved"] == 0.0
    assert (row.judged, row.failed_rewrites, row.unjudged) == (8, 2, 5)
    (none,) = summarize([Outcome("z", None)])
    assert none.excluded_by == ["no verdicts"]

"""The slice section of the support report: an axis where every task is ``unknown`` is
named once and not tabled; a small slice is flagged with the stated minimum."""

from __future__ import annotations

from carebench.report import Paragraph, Table
from carebench.support.report import MIN_SLICE_TASKS, _slices


def _value(n):
    return {"n_tasks": n, "pooled": 0.5, "pooled_ci": [0.4, 0.6], "per_model": {"m": 0.5}}


def test_all_unknown_axes_are_hidden_and_small_slices_flagged():
    metrics = {"config": {"responders": ["m"]}, "slices": {
        "age_band": {"values": {"unknown": _value(12)}},
        "harm_intent": {"values": {"unknown": _value(12)}},
        "turn_structure": {"values": {"multi": _value(2), "single": _value(10)},
                           "contrast": {"a": "multi", "b": "single", "diff": -0.2, "ci": [-0.2, -0.2]}},
    }}
    blocks = _slices(metrics).blocks
    tables = [b for b in blocks if isinstance(b, Table)]
    assert [t.columns[0] for t in tables] == ["Turn structure"]
    assert [r[0] for r in tables[0].rows] == ["Multi \u2020", "Single"]  # values read as words
    assert f"fewer than {MIN_SLICE_TASKS} tasks" in tables[0].caption
    assert "not informative" in tables[0].caption
    said = " ".join(b.text for b in blocks if isinstance(b, Paragraph))
    assert "Not shown: age band, harm intent" in said

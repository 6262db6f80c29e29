"""Charts are laid out once and drawn once, with the pixels matplotlib's own constrained
layout gives (which ``savefig`` would otherwise run in two full draws)."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from carebench.report import figures as F


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def _charts():
    rng = np.random.default_rng(3)
    dims = ["safety", "empathy", "escalation", "moralization", "harmless", "resources", "clarify"]
    return {
        "bars": lambda: F.bar_chart(dims, {"median": rng.random(7).tolist(), "best": rng.random(7).tolist()},
                                    "Median vs best", "score"),
        "heatmap": lambda: F.heatmap(rng.random((5, 7)), [f"model-{i}" for i in range(5)], dims, "Scores"),
        "confusion": lambda: F.confusion_heatmap(rng.integers(0, 9, (4, 4)), ["a", "b", "c", "d"], "Confusion"),
    }


def test_each_chart_is_drawn_once_with_the_constrained_layouts_pixels(monkeypatch):
    draws = []
    real_draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(1) or real_draw(self, renderer))
    ours = {}
    for name, make in _charts().items():
        draws.clear()
        ours[name] = make()
        assert len(draws) == 1, name  # savefig with a layout engine set draws twice
    # the reference: the same charts with matplotlib running the constrained layout in savefig
    monkeypatch.setattr(F, "_lay_out_once", lambda fig, dpi: None)
    for name, make in _charts().items():
        draws.clear()
        ref = make()
        assert len(draws) == 2, name
        assert np.array_equal(_pixels(ours[name]), _pixels(ref)), name

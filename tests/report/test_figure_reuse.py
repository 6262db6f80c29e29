"""Re-rendering reuses a chart's PNG only when everything it was drawn from is the same."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure as MplFigure

from carebench.report import bar_chart, confusion_heatmap, heatmap
from carebench.report.figure_reuse import KEY_CHUNK, png_text, reusing_figures


def _no_drawing(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a chart was drawn")

    monkeypatch.setattr(MplFigure, "savefig", refuse)


def _save(tmp_path, **pngs):
    d = tmp_path / "figures"
    d.mkdir(exist_ok=True)
    for name, png in pngs.items():
        (d / f"{name}.png").write_bytes(png)
    return d


def _bars(scale=1.0, **kw):
    return bar_chart(["a", "b"], {"s": [0.5 * scale, 0.25]}, "Scores", "score", **kw)


def test_same_inputs_reuse_the_png_without_drawing(tmp_path, monkeypatch):
    first = _bars()
    d = _save(tmp_path, bars=first)
    _no_drawing(monkeypatch)
    with reusing_figures(d):
        assert _bars() == first


def test_changed_inputs_are_drawn_again(tmp_path):
    d = _save(tmp_path, bars=_bars())
    with reusing_figures(d):
        changed = _bars(scale=1.0 + 1e-12)  # the smallest change to one value
        other_option = _bars(ylim=(0.0, 1.0))
    assert changed != _bars() and png_text(changed, KEY_CHUNK) != png_text(_bars(), KEY_CHUNK)
    assert png_text(other_option, KEY_CHUNK) != png_text(_bars(), KEY_CHUNK)


def test_a_reused_png_is_the_png_a_new_drawing_gives(tmp_path):
    m = np.array([[0.2, np.nan], [0.7, 0.1]])
    drawn = heatmap(m, ["r1", "r2"], ["c1", "c2"], "t")
    d = _save(tmp_path, h=drawn)
    with reusing_figures(d):
        reused = heatmap(m.copy(), ["r1", "r2"], ["c1", "c2"], "t")
    assert reused == drawn == heatmap(m, ["r1", "r2"], ["c1", "c2"], "t")


def test_matplotlib_settings_are_part_of_the_key(tmp_path, monkeypatch):
    d = _save(tmp_path, bars=_bars())
    with matplotlib.rc_context({"lines.linewidth": 3.0}), reusing_figures(d):
        redrawn = _bars()
    assert png_text(redrawn, KEY_CHUNK) != png_text(_bars(), KEY_CHUNK)


def test_a_truncated_or_foreign_png_is_never_reused(tmp_path, monkeypatch):
    whole = _bars()
    d = _save(tmp_path, bars=whole[:-20])  # cut short: no IEND
    with reusing_figures(d):
        assert _bars() == whole  # drawn again, complete
    fig = MplFigure(figsize=(1, 1))
    from carebench.report import fig_to_png

    assert png_text(fig_to_png(fig), KEY_CHUNK) is None  # a figure made outside the helpers has no key


def test_the_outer_chart_keys_a_chart_drawn_inside_another(tmp_path, monkeypatch):
    counts = [[3, 1], [0, 4]]
    png = confusion_heatmap(counts, ["a", "b"], "Confusion")
    plain = heatmap([[0.75, 0.25], [0.0, 1.0]], ["a", "b"], ["a", "b"], "Confusion",
                    annotations=np.array(counts), fmt=".2f", xlabel="Predicted", ylabel="True",
                    vmin=0.0, vmax=1.0)
    assert png_text(png, KEY_CHUNK) != png_text(plain, KEY_CHUNK)
    d = _save(tmp_path, c=png)
    _no_drawing(monkeypatch)
    with reusing_figures(d):
        assert confusion_heatmap(counts, ["a", "b"], "Confusion") == png
    with pytest.raises(AssertionError, match="drawn"), reusing_figures(d):
        confusion_heatmap(counts, ["a", "b"], "Other title")

"""Figure helpers: valid, readable, deterministic PNGs, and no global matplotlib side effects."""

from __future__ import annotations

import io
import re
import struct

import matplotlib
import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.figure import Figure as MplFigure

from carebench.report import (
    Figure,
    bar_chart,
    box_chart,
    confusion_heatmap,
    dot_interval_chart,
    fig_to_png,
    heatmap,
    line_chart,
)
from carebench.report.figures import row_normalise

SIG = b"\x89PNG\r\n\x1a\n"
LEVELS = ["Indicator", "Ideation", "Behavior", "Attempt"]


def chunk_types(png: bytes) -> list[bytes]:
    """Walk the PNG chunk list (independent of matplotlib/Pillow)."""
    out, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        out.append(png[pos + 4:pos + 8])
        pos += 12 + length
    return out


MAKERS = {
    "bar": lambda scale=1.0: bar_chart(
        LEVELS, {"prompted": [0.8 * scale, 0.4, 0.6, 0.7], "moderation": [0.7, None, 0.5, 0.9]},
        "Per-class F1 by method", "F1", errors={"prompted": [0.05, 0.04, 0.06, 0.03]}),
    "heatmap": lambda scale=1.0: heatmap(
        np.array([[0.6 * scale, 0.4], [0.1, 0.9]]), ["Ideation", "Attempt"], ["Ideation", "Attempt"],
        "Row-normalised confusion", annotations=[[6, 4], [1, 9]], fmt=".2f",
        xlabel="Predicted", ylabel="True"),
    "line": lambda scale=1.0: line_chart(
        [0, 1, 2, 4, 8], {"Macro F1": [0.40, 0.41, 0.40, 0.42, 0.41],
                          "QWK": [0.50 * scale, 0.55, 0.60, 0.62, 0.65]},
        "Few-shot scaling", "k", "score", reference_lines={"Macro F1": 0.41, "QWK": 0.52}),
    "dots": lambda scale=1.0: dot_interval_chart(
        ["m1", "m2", "m3"], [0.5 * scale, 0.7, 0.6], [0.4, 0.6, 0.5], [0.6, 0.8, 0.7],
        "Leaderboard", xlabel="score", bands=["band 1", "band 1", "band 2"]),
    "confusion": lambda scale=1.0: confusion_heatmap(
        [[int(30 * scale), 10, 0, 0], [5, 20, 5, 0], [0, 4, 12, 4], [0, 0, 2, 8]], LEVELS,
        "Prompted LLM"),
    "box": lambda scale=1.0: box_chart(
        {"Indicator": [0.1 * scale, 0.2, 0.05, 0.12], "Ideation": [0.3, 0.5, 0.2, 0.4]},
        "Moderation score by level", "score"),
}


@pytest.fixture(scope="module")
def rendered():
    return {name: make() for name, make in MAKERS.items()}


@pytest.mark.parametrize("name", list(MAKERS))
def test_helpers_produce_readable_pngs(rendered, name):
    png = rendered[name]
    assert png[:8] == SIG
    img = mpimg.imread(io.BytesIO(png), format="png")
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert float(img[..., :3].std()) > 0.01  # something was drawn, not a blank canvas
    Figure(name, png, "accepted by the document model")


@pytest.mark.parametrize("name", list(MAKERS))
def test_identical_data_gives_identical_bytes(rendered, name):
    assert MAKERS[name]() == rendered[name]
    assert MAKERS[name](scale=0.5) != rendered[name]  # and the bytes do depend on the data


def text_chunks(png: bytes) -> list[bytes]:
    out, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        if png[pos + 4:pos + 8] == b"tEXt":
            out.append(png[pos + 8:pos + 8 + length])
        pos += 12 + length
    return out


@pytest.mark.parametrize("name", list(MAKERS))
def test_no_timestamp_or_software_metadata(rendered, name):
    kinds = chunk_types(rendered[name])
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    assert not {b"iTXt", b"zTXt", b"tIME"} & set(kinds)
    # one text chunk only: the chart's key (a SHA-256 of its inputs), no software or date
    texts = text_chunks(rendered[name])
    assert len(texts) == 1 and texts[0].startswith(b"carebench-figure\0")
    assert re.fullmatch(rb"[0-9a-f]{64}", texts[0].split(b"\0", 1)[1])


def test_dpi_scales_the_image():
    fig = MplFigure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1], [0, 1])
    lo = mpimg.imread(io.BytesIO(fig_to_png(fig, dpi=50)), format="png")
    hi = mpimg.imread(io.BytesIO(fig_to_png(fig, dpi=100)), format="png")
    assert lo.shape[:2] == (50, 100) and hi.shape[:2] == (100, 200)


def test_global_matplotlib_state_is_untouched():
    before = matplotlib.rcParams.copy()  # includes the (possibly unresolved) backend entry
    bar_chart(["a"], {"s": [1.0]}, "t", "y")
    heatmap([[1.0]], ["r"], ["c"], "t")
    assert matplotlib.rcParams == before


def test_pyplot_figures_are_closed_after_rendering():
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = plt.figure()
    fig.add_subplot().plot([1, 2])
    assert fig_to_png(fig)[:8] == SIG
    assert fig.number not in plt.get_fignums()


def test_dollar_signs_in_names_are_literal_not_mathtext():
    png = bar_chart(["cost $5", "x"], {"model$": [1.0, 2.0], "$unbalanced": [1.0, 1.0]},
                    "$ title", "$")
    assert png[:8] == SIG


def test_shape_mismatches_raise():
    with pytest.raises(ValueError, match="expected 2 values"):
        bar_chart(["a", "b"], {"s": [1.0]}, "t", "y")
    with pytest.raises(ValueError, match="does not match the labels"):
        heatmap([[1.0, 2.0]], ["r"], ["c"], "t")
    with pytest.raises(ValueError, match="annotations shape"):
        heatmap([[1.0]], ["r"], ["c"], "t", annotations=[[1, 2]])
    with pytest.raises(ValueError, match="bands needs"):
        dot_interval_chart(["a"], [1.0], [0.5], [1.5], "t", bands=[1, 2])
    with pytest.raises(ValueError, match="errors"):
        bar_chart(["a", "b"], {"s": [1.0, 2.0]}, "t", "y", errors={"s": [1.0]})


def test_row_normalise_hand_worked():
    got = row_normalise([[3, 1], [0, 0], [2, 2]])
    np.testing.assert_allclose(got[0], [0.75, 0.25])
    assert np.isnan(got[1]).all()  # no items of that class: undefined, not 0
    np.testing.assert_allclose(got[2], [0.5, 0.5])


@pytest.mark.parametrize("n", [3, 7, 12])
def test_bar_chart_legend_never_sits_on_the_axis_labels(monkeypatch, n):
    """The support report's "Median vs best model per dimension" (seven rotated labels):
    the legend's box, measured by matplotlib's own renderer at save time, meets no tick
    label, axis label or title."""
    from carebench.report import figures

    boxes = {}
    real = figures.fig_to_png

    def measured(fig, dpi=120, **kw):
        fig.canvas.draw()  # lay out (constrained layout) exactly as savefig will
        r = fig.canvas.get_renderer()
        ax = fig.axes[0]
        boxes["legend"] = ax.get_legend().get_window_extent(r)
        boxes["texts"] = [t.get_window_extent(r) for t in
                          (*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label, ax.yaxis.label, ax.title)
                          if t.get_text()]
        return real(fig, dpi, **kw)

    monkeypatch.setattr(figures, "fig_to_png", measured)
    cats = ["recognition", "compassion", "deescalation", "resources", "disclaimers", "safety planning",
            "follow-up questions", "a", "b", "c", "d", "e"][:n]
    figures.bar_chart.__wrapped__(cats, {"median model": [0.5] * n, "best model": [0.9] * n},
                                  "Median vs best model per dimension", "pass rate", ylim=(0.0, 1.1))
    legend = boxes["legend"]
    hits = [b for b in boxes["texts"] if legend.overlaps(b)]
    assert boxes["texts"] and not hits, f"legend {legend} overlaps {hits}"

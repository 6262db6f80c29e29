"""A chart with nothing to show (no value, all NaN, one point where a line or a distribution
is drawn) becomes one sentence in the report instead of an empty or degenerate image."""

from __future__ import annotations

import math

import pytest

from carebench.report import Figure, Paragraph, render_html, render_markdown
from carebench.report.document import PNG_SIGNATURE, Report, Section
from carebench.report.figures import (
    NothingToShow,
    bar_chart,
    box_chart,
    confusion_heatmap,
    dot_interval_chart,
    figure_or_sentence,
    heatmap,
    line_chart,
    scatter_chart,
    stacked_bar_chart,
)

NAN = math.nan

EMPTY = {
    "bar, all missing": lambda: bar_chart(["a", "b"], {"s": [None, NAN]}, "Bars", "y"),
    "stacked, all missing": lambda: stacked_bar_chart(["a"], {"full": [None], "failed": [NAN]}, "Stacks", "%"),
    "heatmap, all NaN": lambda: heatmap([[NAN, NAN]], ["r"], ["c1", "c2"], "Heat"),
    "confusion, no items": lambda: confusion_heatmap([[0, 0], [0, 0]], ["x", "y"], "Confusion"),
    "line, one level": lambda: line_chart([1, 2, 3], {"a": [None, 0.5, None], "b": [NAN, 0.4, NAN]},
                                          "Line", "level", "y"),
    "line, nothing": lambda: line_chart([1, 2], {"a": [None, None]}, "Line", "level", "y"),
    "box, one value per group": lambda: box_chart({"g1": [1.0], "g2": [2.0], "g3": []}, "Box", "y"),
    "box, no values": lambda: box_chart({"g1": [], "g2": [None]}, "Box", "y"),
    "dots, all NaN": lambda: dot_interval_chart(["a", "b"], [NAN, NAN], [NAN, NAN], [NAN, NAN], "Dots"),
    "scatter, no pair": lambda: scatter_chart(["a", "b"], [0.1, NAN], [NAN, 0.2], "Scatter", "x", "y"),
}

DRAWN = {
    "bar, one value": lambda: bar_chart(["a", "b"], {"s": [None, 0.3]}, "Bars", "y"),
    "line, two levels": lambda: line_chart([1, 2, 3], {"a": [0.1, None, None], "b": [None, 0.4, None]},
                                           "Line", "level", "y"),
    "box, one group of two": lambda: box_chart({"g1": [1.0, 3.0], "g2": [2.0]}, "Box", "y"),
    "heatmap, one cell": lambda: heatmap([[NAN, 0.2]], ["r"], ["c1", "c2"], "Heat"),
    "scatter, one pair": lambda: scatter_chart(["a"], [0.1], [0.2], "Scatter", "x", "y"),
}


@pytest.mark.parametrize("case", list(EMPTY))
def test_a_chart_with_nothing_to_show_is_one_sentence(case):
    with pytest.raises(NothingToShow):
        EMPTY[case]()
    block = figure_or_sentence("fig-x", "Figure X: a caption.", EMPTY[case])
    assert isinstance(block, Paragraph)
    text = block.text
    # one sentence: it names the chart, ends with one full stop and holds no other sentence end
    assert text.startswith("No chart for \u201c") and text.endswith(".")
    assert text.count(".") == 1
    title = text.split("\u201c", 1)[1].split("\u201d", 1)[0]
    assert title in {"Bars", "Stacks", "Heat", "Confusion", "Line", "Box", "Dots", "Scatter"}


def test_the_sentence_says_why():
    one = figure_or_sentence("f", "c", EMPTY["line, one level"])
    assert one.text == ("No chart for \u201cLine\u201d: a line needs values at two points or more, and only one "
                        "point (2) has a value.")
    box = figure_or_sentence("f", "c", EMPTY["box, one value per group"])
    assert box.text.endswith("each group has at most one.")
    assert figure_or_sentence("f", "c", EMPTY["box, no values"]).text.endswith("there are none.")


@pytest.mark.parametrize("case", list(DRAWN))
def test_a_chart_with_something_to_show_is_drawn(case):
    block = figure_or_sentence("fig-x", "Figure X.", DRAWN[case])
    assert isinstance(block, Figure)
    assert block.png.startswith(PNG_SIGNATURE) and block.caption == "Figure X."


def test_the_sentence_replaces_the_image_in_both_renderings():
    report = Report("R", sections=[Section("S", [figure_or_sentence("fig-empty", "Figure 1.", EMPTY["bar, all missing"])])])
    assert report.figures() == []  # no PNG is written for it
    page, md = render_html(report), render_markdown(report)
    assert "<img" not in page and "No chart for \u201cBars\u201d: no value to show." in page
    assert "No chart for \u201cBars\u201d: no value to show." in md and "![" not in md

"""Document model: cell formatting, intervals, highlighting and validation."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.report import (
    MISSING,
    Details,
    Figure,
    Interval,
    Paragraph,
    Report,
    Section,
    Table,
    figure_name,
    format_value,
)


def test_interval_format_matches_the_documented_example():
    assert Interval(0.5623, 0.519, 0.599).format() == "0.562 [0.519, 0.599]"
    assert format_value(Interval(0.5623, 0.519, 0.599)) == "0.562 [0.519, 0.599]"


def test_interval_uses_the_table_format_spec():
    assert Interval(0.5623, 0.519, 0.5994).format(".1%") == "56.2% [51.9%, 59.9%]"
    assert Interval(12.0, 10.25, 13.75).format(".1f") == "12.0 [10.2, 13.8]"  # round-half-even


def test_interval_without_bounds_shows_the_value_only():
    assert Interval(0.5, None, None).format() == "0.500"
    assert Interval(0.5, 0.4).format() == "0.500"


@pytest.mark.parametrize(
    ("value", "fmt", "expected"),
    [
        (None, ".3f", MISSING),
        (float("nan"), ".3f", MISSING),
        (np.float64("nan"), ".2f", MISSING),
        (452, ".3f", "452"),
        (np.int64(452), ".3f", "452"),
        (np.float32(0.25), ".2f", "0.25"),
        (2 / 3, ".3f", "0.667"),
        (-0.0004, ".3f", "0.000"),  # no "-0.000"
        (-0.0004, ".1%", "0.0%"),
        (-0.4, ".3f", "-0.400"),
        (True, ".3f", "yes"),
        ("text", ".3f", "text"),
    ],
)
def test_format_value(value, fmt, expected):
    assert format_value(value, fmt) == expected


def test_table_rejects_ragged_rows_and_unknown_columns():
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        Table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="no column named"):
        Table(["a", "b"], [[1, 2]], highlight_max_cols=["c"])
    with pytest.raises(ValueError, match="out of range"):
        Table(["a", "b"], [[1, 2]], highlight_max_cols=[2])
    with pytest.raises(ValueError, match="one spec per column"):
        Table(["a", "b"], [[1, 2]], number_format=[".3f"])
    with pytest.raises(ValueError, match="unknown alignment"):
        Table(["a"], [[1]], align=["middle"])


def test_highlight_marks_all_ties_and_skips_missing_values():
    t = Table(
        ["method", "f1", "mae"],
        [["a", Interval(0.7, 0.6, 0.8), 0.30],
         ["b", 0.7, float("nan")],
         ["c", None, 0.10],
         ["d", 0.2, 0.10]],
        highlight_max_cols=["f1"],
        highlight_min_cols=[2],
    )
    assert t.highlighted() == {(0, 1), (1, 1), (2, 2), (3, 2)}


def test_auto_alignment_right_aligns_numeric_columns_only():
    t = Table(["name", "score", "ci", "mixed", "empty"],
              [["x", 1.0, Interval(1, 0, 2), "n/a", None],
               ["y", 2, Interval(1, 0, 2), 3.0, None]])
    assert t.alignments() == ["left", "right", "right", "left", "left"]
    assert Table(["a", "b"], [[1, 2]], align=["c", "l"]).alignments() == ["center", "left"]


def test_per_column_number_format():
    t = Table(["p", "q"], [[0.5, 0.5]], number_format=[".1%", ".2f"])
    assert t.formatted_rows() == [["50.0%", "0.50"]]


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", ".hidden", "x y", "a..b"])
def test_figure_names_that_could_escape_the_figures_dir_are_rejected(bad, png):
    with pytest.raises(ValueError):
        Figure(bad, png, "caption")


def test_figure_name_helper_makes_model_specs_safe(png):
    name = figure_name("confusion llamacpp:/models/x.gguf")
    assert "/" not in name and ":" not in name and " " not in name
    assert Figure(name, png, "c").filename == f"{name}.png"
    assert Figure("cm.png", png, "c").name == "cm"


def test_figure_requires_png_bytes():
    with pytest.raises(ValueError, match="PNG signature"):
        Figure("x", b"GIF89a....", "caption")


def test_anchors_are_unique_and_respect_explicit_ones():
    r = Report("t", sections=[Section("Overview"), Section("Overview"), Section("Per-class F1!"),
                              Section("x", anchor="custom")])
    assert r.anchors() == ["overview", "overview-2", "per-class-f1", "custom"]
    with pytest.raises(ValueError, match="anchor"):
        Section("x", anchor='a" onclick="x')


def test_duplicate_figure_names_with_different_images_are_an_error(make_png):
    same = Figure("f", make_png(1, 2, 3), "a")
    r = Report("t", sections=[Section("s", [same, Details("d", [Figure("f", make_png(1, 2, 3), "b")])])])
    assert [f.name for f in r.figures()] == ["f"]
    r.sections[0].blocks.append(Figure("f", make_png(9, 9, 9), "c"))
    with pytest.raises(ValueError, match="Two different figures"):
        r.figures()


def test_non_blocks_are_rejected():
    with pytest.raises(TypeError):
        Section("s", [Paragraph("ok"), "a bare string"])  # type: ignore[list-item]


def test_nan_sort_key_is_not_a_maximum():
    t = Table(["v"], [[float("nan")], [1.0], [0.5]], highlight_max_cols=["v"])
    assert t.highlighted() == {(1, 0)}


def test_cells_out_of_the_table_are_never_emphasised():
    """bold_cells are (row, column) positions: a negative or too-large one matches no cell
    (it is not a Python index from the end)."""
    from carebench.report import render_html, render_markdown

    t = Table(["a", "b"], [["x", 1], ["y", 2]], bold_cells=[(-1, 0), (0, -1), (2, 0), (0, 5)])
    report = Report("t", sections=[Section("s", [t])])
    html = render_html(report)
    assert "<td" in html and ' best"' not in html and "<strong>x" not in html
    md = render_markdown(report)
    assert "| x | 1 |" in md and "| y | 2 |" in md


def test_rows_changed_after_construction_are_checked_again():
    t = Table(["a", "b"], [[1, 2]])
    t.rows.append([3])
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        t.formatted_rows()


def test_no_best_when_every_value_ties_or_there_is_one_competitor():
    from carebench.report import Interval

    tied = Table(["system", "full"], [["a", Interval(0.0, 0.0, 0.0)], ["b", Interval(0.0, 0.0, 0.0)]],
                 highlight_max_cols=["full"])
    assert tied.ranks() == {}
    single = Table(["system", "full"], [["a", 0.7]], highlight_max_cols=["full"])
    assert single.ranks() == {}
    # a chance row does not compete, so one real row left is still a single competitor
    with_chance = Table(["m", "f1"], [["chance", 0.25], ["a", 0.5]], highlight_max_cols=["f1"], exclude_rows=[0])
    assert with_chance.ranks() == {}
    two = Table(["m", "f1"], [["a", 0.5], ["b", 0.5], ["c", 0.4]], highlight_max_cols=["f1"])
    assert two.ranks() == {(0, 1): 1, (1, 1): 1}

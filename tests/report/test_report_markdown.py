"""Markdown rendering, checked by rendering it with markdown-it-py (an independent CommonMark
parser with GFM tables) and reading back what a viewer would show."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carebench.report import (
    Callout,
    Details,
    Figure,
    Interval,
    KeyValue,
    Paragraph,
    Pre,
    Report,
    Section,
    Table,
    format_value,
    render_markdown,
)
from carebench.report.markdown import escape_cell, escape_text

markdown_it = pytest.importorskip("markdown_it")


def to_html(md: str) -> str:
    return markdown_it.MarkdownIt("commonmark").enable("table").render(md)


def visible_text(fragment: str) -> str:
    """What a reader sees: tags dropped (<br> as newline), entities decoded, whitespace folded."""
    fragment = re.sub(r"<br\s*/?>", "\n", fragment)
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_table_cells_escape_pipes_and_newlines():
    t = Table(["name | alias", "score"], [["a|b\nc", 0.5], ["plain", Interval(0.5623, 0.519, 0.599)]])
    md = render_markdown(Report("t", sections=[Section("s", [t])]))
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert len(lines) == 4  # header, rule, two rows: the newline did not split a row
    assert all(unescaped_pipes(ln) == 3 for ln in lines)
    assert "a\\|b<br>c" in lines[2]
    assert lines[1] == "| :--- | ---: |"
    assert "| plain | 0.562 [0.519, 0.599] |" in md
    rendered = to_html(md)
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", rendered, flags=re.DOTALL)
    assert [visible_text(c) for c in cells] == [
        "name | alias", "score", "a|b c", "0.500", "plain", "0.562 [0.519, 0.599]"]


def test_no_raw_html_survives(payload_report, payload):
    md = render_markdown(payload_report)
    # Only a fenced code block (Pre) keeps the text verbatim; viewers show it as code.
    outside_code = re.sub(r"^```+text\n.*?^```+$", "", md, flags=re.DOTALL | re.MULTILINE)
    assert outside_code != md
    assert "<script" not in outside_code.lower()
    rendered = to_html(md)
    assert "<script" not in rendered.lower()
    assert payload.replace("|", "").split()[0] in visible_text(rendered).replace("|", "")


def test_figures_link_into_figures_dir(png):
    md = render_markdown(Report("t", sections=[Section("s", [Figure("per-class-f1", png, "Per-class F1")])]))
    assert "![Per-class F1](figures/per-class-f1.png)" in md
    assert '<img src="figures/per-class-f1.png" alt="Per-class F1"' in to_html(md)


def test_line_start_markers_do_not_become_structure():
    text = "# not a heading\n- not a list\n1. not numbered\n> not a quote\n    not code\n---"
    rendered = to_html(render_markdown(Report("t", sections=[Section("s", [Paragraph(text)])])))
    body = rendered.split("</h2>", 1)[1]
    for tag in ("<h1", "<ul", "<ol", "<blockquote", "<pre", "<hr", "<h2"):
        assert tag not in body
    assert visible_text(body) == " ".join(text.split())


def test_callout_is_a_github_alert_and_pre_is_fenced():
    md = render_markdown(Report("t", sections=[Section("s", [
        Callout("the embedded model demonstrates the pipeline only", "warning"),
        Pre("has ``` fences\n<b>raw</b>"),
    ])]))
    assert "> [!WARNING]\n> the embedded model demonstrates the pipeline only" in md
    rendered = to_html(md)
    code = re.search(r"<pre><code[^>]*>(.*?)</code></pre>", rendered, flags=re.DOTALL).group(1)
    assert htmllib.unescape(code) == "has ``` fences\n<b>raw</b>\n"


def test_details_render_as_nested_list(png):
    md = render_markdown(Report("t", sections=[Section("s", [
        Details("Examples (2)", [Paragraph("first"), Table(["a"], [[1]]),
                                 KeyValue({"seed": 42}), Details("inner", [Paragraph("deep")])]),
    ])]))
    rendered = to_html(md)
    assert rendered.count("<ul>") == 3  # details list, key-value list, inner details list
    assert "<table>" in rendered
    assert visible_text(rendered).endswith("Examples (2) first a 1 seed: 42 inner deep")


def test_toc_and_anchors(payload_report):
    md = render_markdown(payload_report)
    for a in payload_report.anchors():
        assert f'<a id="{a}"></a>' in md
        assert f"](#{a})" in md


printable = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from(["\n", "é", "–"]),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(printable)
def test_escaped_text_renders_as_itself(text):
    """Whatever the text, a CommonMark viewer shows exactly it (modulo whitespace)."""
    rendered = to_html(escape_text(text) + "\n")
    assert "<" not in re.sub(r"</?p>|<br\s*/?>", "", rendered)  # no markup but paragraphs
    assert visible_text(rendered) == " ".join(text.split())


@settings(max_examples=100, deadline=None)
@given(printable)
def test_escaped_cell_stays_one_cell(text):
    md = f"| h |\n| --- |\n| {escape_cell(text)} |\n"
    assert md.count("\n") == 3
    rendered = to_html(md)
    cells = re.findall(r"<td>(.*?)</td>", rendered, flags=re.DOTALL)
    if not text.strip():
        return
    assert len(cells) == 1
    assert visible_text(cells[0]) == " ".join(text.split())


table_cell = st.one_of(printable, st.none(), st.integers(-10**6, 10**6),
                       st.floats(allow_nan=True, allow_infinity=False, width=64))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(table_cell, min_size=3, max_size=3), min_size=1, max_size=5),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=3))
def test_table_cells_read_back_as_their_text(rows, bold):
    """Any mix of text, numbers and empty cells: a GFM viewer shows one cell per value with
    its formatted text, and emphasises the chosen cells."""
    t = Table(["a", "b", "c"], rows, bold_cells=bold)
    rendered = to_html(render_markdown(Report("t", sections=[Section("s", [t])])))
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rendered, flags=re.DOTALL)
    want = [format_value(v) for row in rows for v in row]
    assert [visible_text(c) for c in cells] == [" ".join(w.split()) for w in want]
    chosen = {i * 3 + j for i, j in bold if i < len(rows)}
    for k, (cell, text) in enumerate(zip(cells, want, strict=True)):
        if re.fullmatch(r"[\w.\u2013-]+", text):  # emphasis markers around plain words always work
            assert cell.startswith("<strong>") == (k in chosen)


def reference_escape_text(text: str) -> str:
    """escape_text's rules written as patterns (the form they were first written in)."""
    s = text.replace("\r\n", "\n").replace("\r", "\n")
    s = re.sub(r"([\\`*_\[~$])", r"\\\1", s)
    s = re.sub(r"&(?=#?[A-Za-z0-9]+;)", "&amp;", s).replace("<", "&lt;")
    lines = []
    for line in s.split("\n"):
        line = line.lstrip(" \t")
        m = re.match(r"^(\s*)([#>+=-]|\d+[.)])", line)
        if m:
            marker = m.group(2)
            line = (marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker) + line[m.end():]
        lines.append(line)
    return "\n".join(lines)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("\\`*_[~$&#;<>|+=-.)1a \t\r\n\x0b")), max_size=30))
def test_escape_text_follows_its_rules(text):
    assert escape_text(text) == reference_escape_text(text)

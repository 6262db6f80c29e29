"""HTML rendering: escaping, self-containment, table of contents, alignment.

The output is checked with the standard library's HTML parser, an independent
reader: it must see exactly the tags we emit and get back the original text.
"""

from __future__ import annotations

import base64
import html as htmllib
import math
import re
import string
from html.parser import HTMLParser
from importlib import resources

from hypothesis import example, given, settings
from hypothesis import strategies as st

from carebench.report import Figure, Paragraph, Report, Section, Table, format_value, render_html

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "ul", "ol",
    "li", "nav", "strong", "a", "main", "section", "div", "pre", "table", "caption", "thead",
    "tbody", "tr", "th", "td", "figure", "img", "figcaption", "details", "summary", "footer",
    "wbr",  # a line-break opportunity after the punctuation of a long token in a table cell
}


class Collector(HTMLParser):
    """Collects tags, attributes and the text inside each tag name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.text: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in {"meta", "img", "wbr"}:  # void elements: no end tag
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data):
        for tag in set(self.stack):
            self.text.setdefault(tag, []).append(data)


def parse(html: str) -> Collector:
    c = Collector()
    c.feed(html)
    c.close()
    return c


def test_no_script_survives_anywhere(payload_report):
    """No script from the data reaches the page: the only one is carebench's own table sorter
    (the payload's table has two rows, so it sorts), read here from its source file."""
    from importlib import resources

    html = render_html(payload_report)
    sorter = (resources.files("carebench.report") / "templates" / "sort_table.js").read_text("utf-8")
    assert html.count(f"<script>{sorter}</script>") == 1
    rest = html.replace(f"<script>{sorter}</script>", "")
    assert "<script" not in rest.lower()
    assert "</script" not in rest.lower()
    tags = parse(rest).tags
    assert {t for t, _ in tags} <= ALLOWED_TAGS
    assert "script" not in {t for t, _ in tags}


def test_ampersand_and_quotes_are_escaped(payload_report):
    html = render_html(payload_report)
    assert "A&B" not in html
    assert "A&amp;B" in html
    assert 'it\'s "quoted"' not in html
    assert "it&#39;s &#34;quoted&#34;" in html


def test_escaped_text_round_trips_through_a_real_parser(payload_report, payload):
    c = parse(render_html(payload_report))
    assert "".join(c.text["h1"]) == f"Title {payload}"
    assert "".join(c.text["title"]) == f"Title {payload}"
    assert "".join(c.text["caption"]) == f"Caption {payload}"
    assert "".join(c.text["pre"]) == f"Pre {payload}"
    assert f"Summary {payload}" in "".join(c.text["summary"])
    assert f"Figure {payload}" in "".join(c.text["figcaption"])
    cells = "".join(c.text["td"])
    assert f"Cell {payload}" in cells and f"Value {payload}" in cells
    imgs = [a for t, a in c.tags if t == "img"]
    assert imgs[0]["alt"] == f"Figure {payload}"


def test_attribute_breakout_is_impossible(png):
    evil = '" onerror="alert(1)'
    html = render_html(Report("t", sections=[Section("s", [Figure("f", png, evil)])]))
    img = next(a for t, a in parse(html).tags if t == "img")
    assert "onerror" not in img
    assert img["alt"] == evil


def test_self_contained_no_external_references(payload_report, make_png):
    html = render_html(payload_report)
    assert "http://" not in html and "https://" not in html
    assert 'src="figures' not in html
    for tag, attrs in parse(html).tags:
        assert tag not in {"link", "iframe", "object", "embed"}
        if tag == "script":  # carebench's own inline sorter only: no src, no other source
            assert attrs == {}
        if "src" in attrs:
            assert attrs["src"].startswith("data:image/png;base64,")
        if "href" in attrs:
            assert attrs["href"].startswith("#")
    assert "@import" not in html and "url(" not in html


def test_figures_are_inlined_byte_for_byte(payload_report, png, make_png):
    srcs = [a["src"] for t, a in parse(render_html(payload_report)).tags if t == "img"]
    decoded = [base64.b64decode(s.removeprefix("data:image/png;base64,")) for s in srcs]
    assert decoded == [png, make_png(0, 0, 255)]


def test_urls_in_dataset_text_stay_inert_text():
    text = "see https://example.org/x?a=1&b=<2>"
    html = render_html(Report("t", sections=[Section("s", [Paragraph(text)])]))
    c = parse(html)
    assert text in "".join(c.text["p"])
    assert all("href" not in a or a["href"].startswith("#") for _, a in c.tags)


def test_table_of_contents_links_every_section(payload_report):
    c = parse(render_html(payload_report))
    ids = {a["id"] for t, a in c.tags if t == "section"}
    hrefs = [a["href"] for t, a in c.tags if t == "a"]
    assert hrefs == ["#" + i for i in payload_report.anchors()]
    assert {h[1:] for h in hrefs} == ids
    assert "second" in ids


def test_numeric_cells_are_right_aligned_and_best_is_emphasised():
    t = Table(["method", "f1", "n"], [["a", 0.5, 10], ["b", 0.7, 12]], highlight_max_cols=["f1"],
              sortable=False)
    html = render_html(Report("t", sections=[Section("s", [t])]))
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.DOTALL)
    body = [r for r in rows if "<td" in r]
    assert '<td class="left">a</td>' in body[0]
    assert '<td class="right">0.500</td>' in body[0]
    assert '<td class="right best"><strong>0.700</strong></td>' in body[1]
    assert '<th scope="col" class="right">f1</th>' in html
    assert ".right { text-align: right" in html


def test_print_css_and_csp_present(payload_report):
    html = render_html(payload_report)
    assert "@media print" in html
    csp = [a for t, a in parse(html).tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in csp[0]["content"]


def test_page_shell_takes_only_escaped_slots():
    """The page shell is filled by string.Template: a new slot would be a new way in for raw
    text, so the slots are pinned (the body is built from escaped pieces in html.py)."""
    text = (resources.files("carebench.report") / "templates" / "report.html").read_text()
    assert string.Template(text).get_identifiers() == ["script_policy", "generator", "title", "body"]
    assert "<script" not in text.lower()


def test_details_become_collapsible_elements(payload_report):
    tags = [t for t, _ in parse(render_html(payload_report)).tags]
    assert tags.count("details") == 1 and tags.count("summary") == 1


def test_sortable_table_adds_only_the_hash_pinned_sorter(payload):
    """A sortable table brings one inline script, admitted by its SHA-256 in the CSP (so no
    other inline script could run); cells keep escaped text and carry full-precision keys."""
    import hashlib

    table = Table(["id", "score"], [[f"Cell {payload}", 1 / 3], ["b", None], ["c", 0.5]], sortable=True)
    html = render_html(Report("t", sections=[Section("s", [table])]))
    c = parse(html)
    scripts = [a for t, a in c.tags if t == "script"]
    assert scripts == [{}]  # one inline script, no src
    body = html.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
    csp = next(a["content"] for t, a in c.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == f"'sha256-{digest}'"  # no 'unsafe-inline' for scripts
    assert html.lower().count("<script") == 1 and payload not in html
    cells = [a for t, a in c.tags if t == "td"]
    assert [a["data-sort"] for a in cells] == [f"Cell {payload}", repr(1 / 3), "b", "", "c", "0.5"]
    heads = [a["data-sort-type"] for t, a in c.tags if t == "th"]
    assert heads == ["text", "number"]
    # a table that is not sortable keeps the page script-free
    assert "<script" not in render_html(Report("t", sections=[Section("s", [Table(["a"], [[1]])])]))


def test_every_table_path_escapes_text(payload):
    """Plain, highlighted (best and second) and sortable rows are written by different code
    paths: each must escape cell text, headers, the caption and sort keys."""
    columns = [f"name {payload}", "score", f"note {payload}"]
    rows = [[f"a {payload}", 0.9, f"x {payload}"], [f"b {payload}", 0.5, None],
            [f"c {payload}", 0.1, "{0} {}"]]
    for sortable in (False, True):
        table = Table(columns, rows, caption=f"cap {payload}", highlight_max_cols=["score"],
                      highlight_second=True, bold_cells=[(2, 2)], sortable=sortable)
        html = render_html(Report("t", sections=[Section("s", [table])]))
        c = parse(html)
        assert payload not in html
        assert {t for t, _ in c.tags} <= ALLOWED_TAGS | {"u", "script"}
        assert [a for t, a in c.tags if t == "script"] == ([{}] if sortable else [])
        assert "".join(c.text["caption"]) == f"cap {payload}"
        assert "".join(c.text["th"]) == "".join(columns)
        cells = [a for t, a in c.tags if t == "td"]
        assert [x["class"] for x in cells] == ["left", "right best", "left", "left", "right second",
                                               "left", "left", "right", "left best"]
        # the td text, tag by tag: HTMLParser reports the text inside <strong>/<u> too
        bodies = re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.DOTALL)
        texts = [htmllib.unescape(re.sub(r"</?(strong|u)>|<wbr>", "", b)) for b in bodies]
        assert texts == [f"a {payload}", "0.900", f"x {payload}", f"b {payload}", "0.500", "\u2013",
                         f"c {payload}", "0.100", "{0} {}"]
        if sortable:
            assert [x["data-sort"] for x in cells] == [f"a {payload}", "0.9", f"x {payload}",
                                                       f"b {payload}", "0.5", "",
                                                       f"c {payload}", "0.1", "{0} {}"]


def test_markup_objects_never_make_equal_plain_text_unescaped():
    """A str subclass with ``__html__`` (markupsafe.Markup) is rendered as its markup, as Jinja's
    autoescaping would; the escape memo must not hand that unescaped form to an equal plain
    string met later in the same page."""
    from markupsafe import Markup

    raw = "<i>x</i>"
    report = Report("t", sections=[Section("s", [
        Table(["a"], [[Markup(raw)]]), Table(["b"], [[raw]]), Table(["c"], [[Markup(raw)], [raw]], sortable=False),
        Paragraph(Markup(raw)),  # Paragraph text is str()-ed first: escaped
    ])])
    html = render_html(report)
    bodies = [b.replace("<wbr>", "") for b in re.findall(r"<td[^>]*>(.*?)</td>", html)]
    assert bodies == [raw, "&lt;i&gt;x&lt;/i&gt;", raw, "&lt;i&gt;x&lt;/i&gt;"]
    assert "<p>&lt;i&gt;x&lt;/i&gt;</p>" in html


cell_text = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from(["\n", "é", "\u2013", "\0"]),
    max_size=20,
)
cell_value = st.one_of(cell_text, st.none(), st.integers(-10**6, 10**6),
                       st.floats(allow_nan=True, allow_infinity=False, width=64))


@settings(max_examples=60, deadline=None)
@example(rows=[["a\0<b>", 1, "\0"], ["&", None, "'\""]], sortable=True, bold=[(1, 0)])
@given(st.lists(st.lists(cell_value, min_size=3, max_size=3), max_size=6), st.booleans(),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=3))
def test_table_cells_round_trip_through_a_real_parser(rows, sortable, bold):
    """Any cells: a parser reads back each cell's formatted text (and its sort key), and the
    only tags in the body are the table's own."""
    table = Table(["a", "b", "c"], rows, sortable=sortable, bold_cells=bold)
    html = render_html(Report("t", sections=[Section("s", [table])]))
    c = parse(html)
    assert {t for t, _ in c.tags} <= ALLOWED_TAGS | {"script"}
    bodies = re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.DOTALL)
    want = [format_value(v) for row in rows for v in row]
    assert [htmllib.unescape(re.sub(r"</?strong>|<wbr>", "", b)) for b in bodies] == want
    strong = [i for i, b in enumerate(bodies) if b.startswith("<strong>")]
    assert strong == sorted({i * 3 + j for i, j in bold if i < len(rows)})
    if sortable:
        def numeric(j):
            return all(isinstance(r[j], (int, float)) for r in rows if r[j] is not None)

        def key(v, j):
            if v is None or (numeric(j) and math.isnan(v)):
                return ""
            return repr(float(v)) if numeric(j) else format_value(v)

        keys = [a["data-sort"] for t, a in c.tags if t == "td"]
        assert keys == [key(v, j) for row in rows for j, v in enumerate(row)]

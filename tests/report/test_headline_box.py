"""The headline box: rendered first and escaped in both writers, and its choice and caveats
on hand-worked cases."""

from __future__ import annotations

from html.parser import HTMLParser

from carebench.report import (
    Headline,
    Interval,
    Paragraph,
    Report,
    Section,
    render_html,
    render_markdown,
)
from carebench.report.headline import SMALL_N, Candidate, best_headline

from .conftest import PAYLOAD


def _report(h: Headline) -> Report:
    return Report(title="T", banners=["a banner"], headline=h, notes=["a note"],
                  sections=[Section("S", [Paragraph("body")])])


class _Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.data: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.data.append(data)


def test_every_field_is_escaped_and_the_box_precedes_the_sections():
    h = Headline(f"Best system: {PAYLOAD}", measure=f"m {PAYLOAD}", value=Interval(0.5, 0.4, 0.6), n=12,
                 unit="items", caveats=[f"c {PAYLOAD}"], rows=[(f"k {PAYLOAD}", f"v {PAYLOAD}")])
    html = render_html(_report(h))
    assert "<script>alert" not in html
    p = _Texts()
    p.feed(html)
    assert "script" not in p.tags[p.tags.index("body"):]  # no element came from the payload
    text = "".join(p.data)
    assert text.count(PAYLOAD) == 5  # the payload reads back as text, once per field
    assert html.index('class="banner"') < html.index('class="headline"') < html.index('class="notes"') \
        < html.index("<main>")
    assert "0.500 [0.400, 0.600] (n = 12 items)" in text
    md = render_markdown(_report(h))
    assert "<script>" not in md
    assert md.index("[!WARNING]") < md.index("[!IMPORTANT]") < md.index("- a note") < md.index("**Contents**")


def test_no_headline_renders_nothing():
    r = _report(Headline("x"))
    r.headline = None
    assert 'class="headline"' not in render_html(r)
    assert "[!IMPORTANT]" not in render_markdown(r)


def test_best_unflagged_is_chosen_and_a_flagged_one_named():
    cands = [Candidate("a", 0.9, 0.8, 0.95, 100, flagged=True),
             Candidate("b", 0.7, 0.65, 0.75, 100),
             Candidate("c", 0.5, 0.45, 0.55, 100, incomplete="3 of 100 items not scored")]
    h = best_headline("macro-F1", cands, unit="items")
    assert h.verdict == "Best system: b"
    assert (h.value.value, h.value.lo, h.value.hi, h.n) == (0.7, 0.65, 0.75, 100)
    assert any("flagged" in c and "a" in c for c in h.caveats)
    assert "incomplete: c: 3 of 100 items not scored" in h.caveats
    # [0.65, 0.75] and [0.45, 0.55] do not overlap: separable, no such caveat
    assert not any("not separable" in c for c in h.caveats)


def test_lower_is_better_overlap_small_n_and_collapsed_interval():
    cands = [Candidate("x", 0.30, 0.30, 0.30, SMALL_N - 1), Candidate("y", 0.25, 0.2, 0.32, SMALL_N - 1)]
    h = best_headline("MAE", cands, unit="items", higher_is_better=False)
    assert h.verdict == "Best system: y"
    text = " | ".join(h.caveats)
    assert "not separable from the runner-up x" in text  # [0.2, 0.32] overlaps [0.30, 0.30]
    assert f"small n: {SMALL_N - 1} items" in text
    one = best_headline("MAE", [cands[0]], unit="items")
    assert one.verdict == "System: x"
    assert any("collapsed to a point" in c for c in one.caveats)


def test_ties_and_nothing_scored():
    h = best_headline("s", [Candidate("p", 0.5, 0.4, 0.6, 40), Candidate("q", 0.5, 0.4, 0.6, 40)], unit="tasks")
    assert h.verdict == "Best system: p" and "tied with q" in h.caveats
    none = best_headline("s", [Candidate("p", None), Candidate("q", float("nan"))], unit="tasks")
    assert none.verdict == "No system has a score" and none.value is None

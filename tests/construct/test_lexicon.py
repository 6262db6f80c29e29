"""Lexicon matching: whole words only, shipped terms present, user extension."""

from __future__ import annotations

import pytest

from carebench.construct.lexicon import load_lexicon
from carebench.types import CarebenchError


@pytest.fixture(scope="module")
def lex():
    return load_lexicon()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("went to the shop today", set()),
        ("I wish it would stop", set()),
        ("good food, od nothing", {"od"}),
        ("so good", set()),
        ("relapsed on sh last night", {"sh", "relapsed?"}),
        ("SH again.", {"sh"}),
        ("my barcode is showing", {"barcode"}),
        ("thinking about sewer slide", {"sewer slide"}),
        ("thinking about sewer-slide", {"sewer slide"}),
        ("kms fr", {"kms"}),
        ("the kmsl joke", set()),
        ("I might od", {"od"}),
        ("periodic table", set()),
    ],
)
def test_word_boundaries(lex, text, expected):
    assert {h.label for h in lex.find(text)} == expected


def test_user_extension(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("entries:\n  - {term: 'cb', category: context, kind: localized}\n", "utf-8")
    lex = load_lexicon([extra])
    assert {h.label for h in lex.find("during CB I sh")} == {"cb", "sh"}
    assert not lex.find("cbd oil")
    only = load_lexicon([extra], replace=True)
    assert len(only) == 1


def test_bad_lexicon(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries:\n  - {regex: '(unclosed'}\n", "utf-8")
    with pytest.raises(CarebenchError, match="entry 1: invalid regex"):
        load_lexicon([bad])

"""Anonymization chain on planted identifiers: nothing left, nothing over-replaced."""

from __future__ import annotations

import pytest

from carebench.construct.anonymize import anonymize_rows, make_backend

PLANTED = (
    "I'm Tan Wei Ming lah. NRIC S1234567D, FIN G7654321K. Call 9123 4567 or +65 6123-4567, "
    "mail tan.wm@example.com, IG @weiming_99, blog https://weiming.example.org/post. "
    "My barcode is back and the Barcode Club posts did not help."
)
IDENTIFIERS = ["Tan Wei Ming", "S1234567D", "G7654321K", "9123 4567", "6123-4567", "tan.wm@example.com",
               "@weiming_99", "https://weiming.example.org/post"]


def _check(text):
    for ident in IDENTIFIERS:
        assert ident not in text, ident
    assert "barcode is back" in text and "Barcode Club" in text  # reversal list restored it


def test_pattern_chain_with_known_names():
    backend = make_backend("presidio", names=["Tan Wei Ming"])
    assert not backend.ner
    res = anonymize_rows([("r1", PLANTED, False)], backend, reversals=["Barcode", "Barcode Club"], literals=[])
    out = res.rows[0].text
    _check(out)
    assert out.count("[NRIC]") == 2 and out.count("[PHONE]") == 2 and "[NAME]" in out
    assert "[EMAIL]" in out and "[HANDLE]" in out and "[URL]" in out
    assert res.residual_hits == []
    assert res.counts["1_replaced"]["PHONE_NUMBER"] == 2
    assert "pattern recognizers only" in res.summary()["ner_note"]


def test_ner_path_with_a_spacy_pipeline(tmp_path):
    """The NER path, exercised with a rule-based spaCy pipeline saved to disk (no
    trained model ships on PyPI under spaCy's own name; see docs/construct.md)."""
    import spacy  # a dependency of presidio-analyzer (construct extra)

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "PERSON", "pattern": "Tan Wei Ming"},
                        {"label": "ORG", "pattern": "Barcode Club"},
                        {"label": "PERSON", "pattern": [{"LOWER": "barcode"}]}])
    nlp.to_disk(tmp_path / "pipe")
    backend = make_backend(f"presidio:spacy={tmp_path / 'pipe'}")
    assert backend.ner
    res = anonymize_rows([("r1", PLANTED, False)], backend, reversals=["barcode", "barcode club"], literals=[])
    _check(res.rows[0].text)
    assert res.counts["2_reversed"].get("PERSON", 0) + res.counts["2_reversed"].get("ORGANIZATION", 0) == 2
    assert res.counts["1_replaced"]["PERSON"] >= 1


def test_residual_checks_and_restoration():
    backend = make_backend("presidio")
    rows = [
        ("leak", "Posted on HardwareZone by a friend", False),  # literal residual (platform name)
        ("miss", "my IC is s1234567d", False),  # lower-case NRIC: replaced by the backend
        ("public", "Contact me at 9123 4567", True),  # de-identified upstream: restored
    ]
    res = anonymize_rows(rows, backend, reversals=[], literals=["HardwareZone"])
    assert [h["id"] for h in res.residual_hits] == ["leak"]
    assert res.rows[2].text == "Contact me at 9123 4567" and res.rows[2].restored
    assert res.counts["5_restored"] == {"rows": 1}
    assert "s1234567d" not in res.rows[1].text


def test_identifier_seen_elsewhere_is_a_residual():
    """An identifier replaced in one row but missed in another is caught by the literal check."""

    class Partial:
        name, ner = "partial", False

        def detect(self, text):
            from carebench.construct.anonymize import Span

            i = text.find("Wei Ming")
            return [Span("PERSON", i, i + 8, 0.9, "Wei Ming")] if text.startswith("A") and i >= 0 else []

    res = anonymize_rows([("a", "A: Wei Ming here", False), ("b", "B: ask Wei Ming", False)], Partial(), [], [])
    assert res.rows[0].text == "A: [NAME] here"
    assert res.residual_hits == [{"id": "b", "check": "literal", "what": "Wei Ming"}]


def test_unknown_backend_is_a_user_error():
    from carebench.types import CarebenchError

    with pytest.raises(CarebenchError):
        make_backend("cloak")
    with pytest.raises(CarebenchError, match="not installed"):
        make_backend("presidio:spacy=en_core_web_nonexistent")

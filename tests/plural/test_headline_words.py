"""The plural headline boxes' words: a reply whose call failed is said to be missing from the
scores (not "harness failures", which a refused request is not), counted with its noun, and a
calibration caveat names its archetype once, by name."""

from __future__ import annotations

from carebench.plural.report import calibration_headline, plural_headline


def _cell(system, profile, value):
    return {"system": system, "profile": profile, "archetype": "peer", "full": {"value": value, "ci": [0.1, 0.9],
                                                                               "n": 40}}


def test_a_lost_reply_is_counted_with_its_noun_and_said_to_be_left_out():
    for lost, words in ((1, "1 reply not obtained"), (3, "3 replies not obtained")):
        head = plural_headline({"cells": [_cell("a", "P1", 0.5), _cell("b", "P1", 0.4)],
                                "counts": {"response_harness_failures": {"a": lost}}})
        caveat = next(c for c in head.caveats if c.startswith("incomplete: a: "))
        assert words in caveat and "left out of the scores" in caveat and "harness" not in caveat


def test_a_calibration_warning_names_its_archetype_once():
    head = calibration_headline({"selection": {"peer": {"method": "E0", "warning": "peer: no method beat E0"},
                                               "clinician": {"method": "E2", "warning": None}},
                                 "methods": {}})
    assert "Peer support: no method beat E0" in head.caveats
    assert not any("peer: peer" in c or "Peer support: peer:" in c for c in head.caveats)
    assert [r[0] for r in head.rows] == ["Peer support", "Clinician"]

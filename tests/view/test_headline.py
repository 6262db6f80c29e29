"""The view's generic headline on the metrics shapes the suites write (hand-made, values worked by hand)."""

from __future__ import annotations

from carebench.view.runs import suite_headline


def test_converse_overall_row_of_each_chatbot():
    metrics = {"settings": {"unit": "persona"}, "chatbots": {
        "openai:a": {"personas": 6, "scores": [{"dimension": "risk", "score": 10.0, "ci_low": 1.0, "ci_high": 20.0},
                                               {"dimension": "overall", "score": 12.5, "ci_low": 3.0, "ci_high": 22.0}]},
        "openai:b": {"personas": 6, "scores": [{"dimension": "overall", "score": 30.0, "ci_low": 20.0, "ci_high": 40.0}]},
    }}
    h, systems = suite_headline(metrics, {})
    assert (h.system, h.value, h.lo, h.hi, h.n) == ("openai:b", 30.0, 20.0, 40.0, 6)
    assert systems == ["openai:a", "openai:b"]


def test_plural_cells_best_full_alignment():
    cell = lambda s, p, v: {"system": s, "profile": p, "full": {"value": v, "ci": [v - 0.1, v + 0.1], "n": 9}}
    metrics = {"settings": {}, "counts": {"prompts": 9}, "cells": [cell("x", "P1", 0.4), cell("y", "P1", 0.7),
                                                                    cell("x", "C1", 0.5)]}
    h, _ = suite_headline(metrics, {})
    assert (h.system, h.label, h.value, h.n) == ("y (P1)", "full alignment", 0.7, 9)
    assert (round(h.lo, 6), round(h.hi, 6)) == (0.6, 0.8)


def test_a_flagged_method_never_heads_and_a_given_headline_wins():
    metrics = {"methods": {"a": {"macro_f1": {"value": 0.9, "ci": [0.8, 1.0]}, "flagged": True, "n_scored": 5},
                           "b": {"macro_f1": {"value": 0.6, "ci": [0.5, 0.7]}, "flagged": False, "n_scored": 5}}}
    h, _ = suite_headline(metrics, {})
    assert (h.system, h.value) == ("b", 0.6)
    metrics["headline"] = {"label": "QWK", "system": "a", "value": 0.3, "ci": [0.1, 0.5], "n": 5}
    h, _ = suite_headline(metrics, {})
    assert (h.label, h.system, h.value) == ("QWK", "a", 0.3)

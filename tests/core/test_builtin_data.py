"""`builtin:NAME` resolves the same way for every suite (carebench.datasets.builtin)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import carebench
from carebench.cli import main
from carebench.datasets.builtin import resolve_input
from carebench.types import CarebenchError

FILES = {"sources": "sources.jsonl", "personas": "personas.jsonl"}


def test_builtin_name_is_the_package_file():
    want = Path(carebench.__file__).parent / "data" / "construct" / "sources.jsonl"
    got = resolve_input("builtin:sources", "construct", FILES)
    assert hashlib.sha256(got.read_bytes()).digest() == hashlib.sha256(want.read_bytes()).digest()


def test_unknown_name_lists_the_known_ones_and_a_missing_path_is_named(tmp_path):
    with pytest.raises(CarebenchError, match=r"unknown built-in 'nope'; known: personas, sources$"):
        resolve_input("builtin:nope", "construct", FILES)
    with pytest.raises(CarebenchError, match="missing.jsonl: file not found"):
        resolve_input(tmp_path / "missing.jsonl", "construct", FILES)
    assert resolve_input(tmp_path, "construct", FILES) == tmp_path  # an existing path passes through


def test_every_suite_reports_an_unknown_builtin_in_one_line(tmp_path, capsys):
    assert main(["construct", "screen", "--sources", "builtin:nope", "--out", str(tmp_path / "s")]) == 2
    assert main(["risk", "run", "--data", "builtin:nope", "--model", "replay:x", "--method", "tfidf-lr"]) == 2
    assert main(["support", "run", "--tasks", "builtin:nope", "--responder", "replay:x", "--judge", "replay:x",
                 "--out", str(tmp_path / "u")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]
    assert err == [("carebench: error: unknown built-in 'nope'; known: build, expressions, lexicon, personas, "
                    "reversals, sources"),
                   "carebench: error: unknown built-in dataset 'nope'; known: sample, sample-with-negatives",
                   "carebench: error: unknown built-in support task set 'nope'; known: sample"]


def test_support_builtin_tasks_are_the_package_file():
    from carebench.support.tasks import load_tasks

    want = Path(carebench.__file__).parent / "data" / "support" / "sample.jsonl"
    ids = [json.loads(x)["id"] for x in want.read_text("utf-8").splitlines() if x.strip()]
    assert [t.id for t in load_tasks("builtin:sample")] == ids

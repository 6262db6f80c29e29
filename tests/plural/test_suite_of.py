"""``carebench.suites.suite_of`` for plural: a run directory's manifest ``kind`` picks the command object
that re-scores and renders it; any other kind is one line (``carebench report`` exits 2)."""

from __future__ import annotations

import json

import pytest

from carebench import suites
from carebench.cli import main
from carebench.types import CarebenchError


@pytest.mark.parametrize(("kind", "name"), [
    ("run", "RunCommand"), ("sample", "SampleCommand"), ("calibrate", "CalibrateCommand"),
    ("freeze", "FreezeCommand"), ("label", "LabelCommand"), ("agreement", "AgreementCommand"),
])
def test_each_kind_has_its_command(kind, name):
    obj = suites.suite_of("plural", kind)
    assert type(obj).__name__ == name and type(obj).__module__ == f"carebench.plural.commands.{kind}"
    assert obj.cfg is None  # configless: it scores and renders only


@pytest.mark.parametrize("kind", [None, "rescore", ["run"], 3])
def test_other_kinds_are_one_line(kind):
    with pytest.raises(CarebenchError, match="no plural report for run kind") as e:
        suites.suite_of("plural", kind)
    assert "\n" not in str(e.value)


def test_report_of_an_unknown_kind_exits_2(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps({"suite": "plural", "kind": "nonsense"}))
    (tmp_path / "records.jsonl").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no plural report for run kind 'nonsense'" in err[0]

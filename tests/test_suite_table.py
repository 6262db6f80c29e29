"""A suite is one entry of the suite table: a toy suite (tests/toy/toy_suite.py) added as
one entry runs through ``carebench toy run``, re-renders with ``carebench report`` and
compares with ``carebench compare``; and the table names modules that exist."""

from __future__ import annotations

import importlib
import json

import pytest

from carebench import cli, suites
from carebench.cli import main
from carebench.types import CarebenchError
from stub_server import StubReply, StubServer
from toy.toy_suite import COLOURS, ENTRY, ITEMS


@pytest.fixture
def toy_table(monkeypatch):
    """The suite table with the toy's entry added (and the CLI's mounted apps restored after)."""
    monkeypatch.setattr(suites, "SUITES", {**suites.SUITES, "toy": ENTRY})
    monkeypatch.setattr(cli, "_MOUNTED", set(cli._MOUNTED))
    monkeypatch.setattr(cli.app, "registered_groups", list(cli.app.registered_groups))


def _answer(req) -> StubReply:
    """Model "good" answers right; model "yes" says yes to everything."""
    text = req.text.lower().rsplit("\n", 1)[-1]
    if req.body["model"] == "good":
        return StubReply(content="yes" if any(c in text for c in COLOURS) else "no")
    return StubReply(content="yes")


def _read(path):
    return json.loads(path.read_text("utf-8"))


def test_a_toy_suite_from_one_entry_runs_rerenders_and_compares(toy_table, tmp_path, capsys):
    good, yes = tmp_path / "good", tmp_path / "yes"
    with StubServer() as stub:
        stub.handler = _answer
        assert main(["toy", "run", "--model", f"openai:good@{stub.base_url}", "--out", str(good)]) == 0
        assert main(["toy", "run", "--model", f"openai:yes@{stub.base_url}", "--out", str(yes)]) == 0
        assert stub.count() == 2 * len(ITEMS)
    # the records, recounted by hand: "good" is always right, "yes" right on the six colour sentences
    for run_dir, expected in ((good, 12), (yes, 6)):
        recs = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
        assert sum((r["answer"] == "yes") == r["gold"] for r in recs) == expected
        assert _read(run_dir / "metrics.json") == {"n": 12, "correct": expected, "accuracy": expected / 12}
        assert _read(run_dir / "manifest.json")["suite"] == "toy"

    # carebench report re-renders it through the table's kind -> class entry
    metrics_bytes = (yes / "metrics.json").read_bytes()
    report = (yes / "report.md").read_text()
    (yes / "metrics.json").unlink()
    (yes / "report.md").unlink()
    assert main(["report", str(yes)]) == 0
    assert (yes / "metrics.json").read_bytes() == metrics_bytes
    assert (yes / "report.md").read_text() == report and "6 of 12 sentences" in report

    # carebench compare reads both through the table's comparer and gates its default measure
    capsys.readouterr()
    assert main(["compare", str(good), str(yes), "--out", str(tmp_path / "cmp")]) == 1  # yes is worse
    m = _read(tmp_path / "cmp" / "metrics.json")
    assert m["suite"] == "toy" and m["settings"]["pair_option"] == "--system"
    assert [g["metric"] for g in m["settings"]["gates"]] == ["accuracy"]
    (row,) = m["pairs"][0]["rows"]
    assert row["diff"] == pytest.approx(6 / 12 - 12 / 12)
    assert main(["compare", str(yes), str(good), "--out", str(tmp_path / "cmp2")]) == 0
    assert main(["report", str(tmp_path / "cmp2")]) == 0
    # compare's --help names the toy's pairing (read from the table when the CLI is built)
    assert suites.pair_options()["--system"].endswith("; toy: pair BASE=CANDIDATE models.")
    assert suites.default_gates_text().endswith(", toy accuracy")


def test_an_unknown_kind_or_suite_is_one_line(tmp_path):
    with pytest.raises(CarebenchError, match="no support report for run kind 'nonsense'"):
        suites.suite_of("support", "nonsense")
    (tmp_path / "manifest.json").write_text(json.dumps({"suite": "nosuch"}))
    with pytest.raises(CarebenchError, match="unknown suite 'nosuch'"):
        suites.rerender(tmp_path)


def test_every_name_in_the_table_exists():
    for name, entry in suites.SUITES.items():
        assert entry.package == f"carebench.{name}"
        for target in [entry.app, *entry.kinds.values(), entry.comparer, entry.demo]:
            if target is not None:
                module, _, attr = target.partition(":")
                assert hasattr(importlib.import_module(module), attr), target
        assert (entry.comparer is None) == (entry.pair_option is None) == (not entry.gates)


def test_the_documented_entry_is_a_valid_entry_shaped_like_the_toy():
    """docs/architecture.md, "Adding a suite": its example entry builds a SuiteEntry (a renamed
    or removed field fails here) and names the same parts the toy suite's real entry does."""
    import ast
    import dataclasses
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text("utf-8")
    section = doc.split("### Adding a suite", 1)[1].split("\n### ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    call = ast.parse("{" + block + "\n}", mode="eval").body.values[0]
    assert isinstance(call, ast.Call) and call.func.id == "SuiteEntry"
    documented = {k.arg for k in call.keywords}
    fields = {f.name for f in dataclasses.fields(suites.SuiteEntry)}
    assert documented <= fields, documented - fields
    entry = suites.SuiteEntry(*[ast.literal_eval(a) for a in call.args],
                              **{k.arg: ast.literal_eval(k.value) for k in call.keywords})
    assert entry.package == "carebench.toy"
    # every part the toy's real entry sets is shown in the example
    shown = {f.name for f in dataclasses.fields(ENTRY) if getattr(ENTRY, f.name) not in (None, "", ())}
    assert shown - {"help"} <= documented, shown - documented

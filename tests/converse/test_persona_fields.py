"""A persona field is one value: a JSON object or list in any field converse reads is refused.

Verification found ``converse run --personas`` running to exit 0 on a JSONL persona whose
``name`` was ``{"nested": true}`` and ``risk_level`` ``{"x": 1}``, writing the objects'
``str()`` into the records. Every other suite refuses a non-scalar field with one line
naming the file, line and field and exit 2; these tests hold converse to the same.
"""

from __future__ import annotations

import json

import pytest
from rubrics import NAV, write_tsv

from carebench.cli import main

GOOD = {"id": "pa", "name": "Anna", "risk_level": "low", "background": "A student.", "age": 19}
DEAD = "http://127.0.0.1:9/v1"  # nothing listens: validation must stop the run before any call


def _run(tmp_path, *extra):
    return main(["converse", "run", "--rubric", str(write_tsv(tmp_path / "nav.tsv", NAV)),
                 "--simulator", f"openai:sim@{DEAD}", "--chatbot", f"openai:bot@{DEAD}",
                 "--judge", f"openai:judge@{DEAD}", "--turns", "2", "--out", str(tmp_path / "run"),
                 "--cache", str(tmp_path / "c.sqlite"), *extra])


def _one_error_line(capsys) -> str:
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("carebench: error:"), err
    return err[0]


@pytest.mark.parametrize("field", ["name", "risk_level", "id", "background", "age",
                                   "Current Risk Level", "persona name"])
@pytest.mark.parametrize("value", [{"nested": True}, ["a", "b"]])
def test_a_nested_persona_field_is_refused(tmp_path, capsys, field, value):
    bad = {k: v for k, v in GOOD.items() if not (field.lower().replace(" ", "_").endswith(k) or
                                                 (field == "persona name" and k == "name"))}
    bad["id"] = "pb" if field != "id" else value
    bad[field] = value
    f = tmp_path / "personas.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n", "utf-8")
    capsys.readouterr()
    assert _run(tmp_path, "--personas", str(f)) == 2
    line = _one_error_line(capsys)
    assert f"{f}:2: field '{field}': expected a single value" in line, line
    assert not (tmp_path / "run").exists()


def test_scalar_fields_of_every_kind_still_load(tmp_path):
    from carebench.converse.personas import load_personas

    f = tmp_path / "personas.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(
        {"id": 7, "name": "Ben", "risk_level": None, "smoker": False, "score": 2.5}) + "\n", "utf-8")
    a, b = load_personas(f)
    assert (a.id, a.name, a.risk_level, a.fields) == ("pa", "Anna", "low", {"background": "A student.", "age": "19"})
    assert (b.id, b.name, b.risk_level, b.fields) == ("7", "Ben", "unknown", {"smoker": "False", "score": "2.5"})


@pytest.mark.parametrize(("change", "field"), [
    ({"subcategory": {"nested": True}}, "subcategory"),
    ({"id": ["t1"]}, "id"),
    ({"metadata": {"progression_stage": {"x": 1}}}, "metadata.progression_stage"),
])
def test_support_tasks_as_personas_refuse_a_nested_field(tmp_path, capsys, change, field):
    from carebench.datasets.builtin import builtin_file

    path = builtin_file("support", "sample", {"sample": "sample.jsonl"})
    row = json.loads(path.read_text("utf-8").splitlines()[0])
    row.update(change)
    f = tmp_path / "tasks.jsonl"
    f.write_text(json.dumps(row) + "\n", "utf-8")
    capsys.readouterr()
    assert _run(tmp_path, "--personas-from", "support-tasks", "--personas", str(f)) == 2
    line = _one_error_line(capsys)
    assert f"{f}:1: field '{field}': expected a single value" in line, line
    assert not (tmp_path / "run").exists()

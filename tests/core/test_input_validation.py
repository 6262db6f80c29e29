"""Every input is validated before the first call: one line, exit 2, nothing written.

Verification found these accepted and run (or scored) with exit 0: a risk CSV whose
unbalanced quote merged 20 items into one, an annotate sheet with a context the taxonomy
does not define, an annotation repeating a code, a persona attribute that is an object,
a support subcategory that is an object or a number, and ``turns`` given as a string.
"""

from __future__ import annotations

import json

import pytest

from carebench.cli import main
from carebench.construct.personas import load_personas
from carebench.datasets.prompts import load_annotations
from carebench.support.tasks import load_tasks
from carebench.types import CarebenchError


def _one_error_line(capsys, needle: str) -> None:
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("carebench: error:") and needle in err[0], err


def test_risk_csv_with_an_unbalanced_quote(tmp_path, capsys):
    rows = ["id,text,level"] + [f"i{k},post number {k},{k % 4}" for k in range(20)]
    rows[3] = 'i2,"she wrote ""bye and left,2'  # the quote never closes: used to swallow 18 rows
    bad = tmp_path / "posts.csv"
    bad.write_text("\n".join(rows) + "\n", "utf-8")
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["risk", "run", "--data", str(bad), "--method", "tfidf-lr", "--out", str(out)]) == 2
    _one_error_line(capsys, f"{bad}:4: malformed CSV")
    assert not out.exists()
    # the same file with the quote closed loads all 20 items
    rows[3] = 'i2,"she wrote ""bye"" and left",2'
    bad.write_text("\n".join(rows) + "\n", "utf-8")
    from carebench.risk.data import load_dataset

    ds = load_dataset(str(bad))
    assert len(ds.items) == 20 and ds.items[2].text == 'she wrote "bye" and left'


def test_annotate_sheet_with_an_unknown_context(tmp_path, capsys):
    sheet = tmp_path / "cases.jsonl"
    sheet.write_text(json.dumps({"id": "c1", "source_id": "p1", "context": "carrier_pigeon",
                                 "persona": "A student.", "text": "I am tired."}) + "\n", "utf-8")
    capsys.readouterr()
    assert main(["annotate", "load", "--db", str(tmp_path / "a.db"), "--project", str(sheet)]) == 2
    _one_error_line(capsys, "context 'carrier_pigeon' is not defined")


def test_annotation_repeating_a_code(tmp_path):
    f = tmp_path / "annotations.jsonl"
    f.write_text(json.dumps({"practitioner": "p1", "archetype": "peer", "case_id": "c1",
                             "intent": ["INTENT_1", "INTENT_1"], "function": ["FUNCTION_1"],
                             "response": ["RESPONSE_1"]}) + "\n", "utf-8")
    with pytest.raises(CarebenchError, match=r"annotations.jsonl: line 1: field 'intent': code 'INTENT_1' is repeated"):
        load_annotations(f)


def test_persona_attribute_that_is_not_a_single_value(tmp_path):
    f = tmp_path / "personas.jsonl"
    f.write_text(json.dumps({"id": "p1", "text": "A nurse.", "age": 31}) + "\n"
                 + json.dumps({"id": "p2", "text": "A driver.", "age": {"min": 40, "max": 50}}) + "\n", "utf-8")
    with pytest.raises(CarebenchError, match=r"personas.jsonl:2: attribute 'age': expected a single value"):
        load_personas(str(f))


def _task(**change):
    """The first task of the built-in sample, changed."""
    from carebench.datasets.builtin import builtin_file

    path = builtin_file("support", "sample", {"sample": "sample.jsonl"})
    row = json.loads(path.read_text("utf-8").splitlines()[0])
    row.update(change)
    return row


@pytest.mark.parametrize(("change", "needle"), [
    ({"subcategory": {"nested": True}}, "subcategory must be a name"),
    ({"subcategory": 3}, "subcategory must be a name"),
    ({"turns": "I am so tired of everything."}, "field turns: expected a list of user turns"),
])
def test_support_task_fields_of_the_wrong_kind(tmp_path, capsys, change, needle):
    f = tmp_path / "tasks.jsonl"
    f.write_text(json.dumps(_task(**change)) + "\n", "utf-8")
    with pytest.raises(CarebenchError, match=needle):
        load_tasks(f)
    capsys.readouterr()
    assert main(["support", "run", "--tasks", str(f), "--responder", "openai:m@http://127.0.0.1:9/v1",
                 "--judge", "openai:j@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run")]) == 2
    _one_error_line(capsys, needle)
    assert not (tmp_path / "run").exists()

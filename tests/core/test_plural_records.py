"""Plural-family records load from JSONL and CSV alike, and bad rows name file, line and field."""

from __future__ import annotations

import json

import pytest

from carebench.datasets.prompts import (
    Annotation,
    PromptRecord,
    load_annotations,
    load_policies,
    load_prompts,
    write_jsonl,
)
from carebench.datasets.sheets import load_criterion_labels, load_reviews
from carebench.types import CarebenchError


def test_prompts_roundtrip_through_jsonl(tmp_path):
    rows = [PromptRecord(id="p1", source_id="s1", context="triage", persona={"text": "a student",
                         "attributes": {"age": 19}}, text="cannot do this anymore")]
    p = write_jsonl(tmp_path / "prompts.jsonl", rows)
    back = load_prompts(p)
    assert back == rows and back[0].persona.attributes == {"age": 19}


def test_annotations_from_csv_accept_lists_flags_and_blank_severities(tmp_path):
    p = tmp_path / "ann.csv"
    p.write_text(
        "practitioner,archetype,case_id,intent,nssi_severity,suicidal_severity,function,response,notes,skipped\n"
        'P1,peer,7,"[""INTENT_3""]",,4,FUNCTION_2;FUNCTION_4,RESPONSE_1|RESPONSE_2,unsure,no\n'
        "P2,clinician,7,INTENT_1,,,FUNCTION_U,RESPONSE_2,,yes\n",
        "utf-8",
    )
    a, b = load_annotations(p)
    assert a == Annotation(practitioner="P1", archetype="peer", case_id="7", intent=["INTENT_3"],
                           suicidal_severity=4, function=["FUNCTION_2", "FUNCTION_4"],
                           response=["RESPONSE_1", "RESPONSE_2"], notes="unsure")
    assert b.skipped is True and b.nssi_severity is None and b.notes == ""


def test_bad_rows_give_file_line_and_field(tmp_path):
    p = tmp_path / "ann.jsonl"
    good = {"practitioner": "P1", "archetype": "peer", "case_id": "c1"}
    p.write_text(json.dumps(good) + "\n" + json.dumps({**good, "archetype": "nurse"}) + "\n", "utf-8")
    with pytest.raises(CarebenchError, match=r"ann.jsonl: line 2: field 'archetype'"):
        load_annotations(p)
    p.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n", "utf-8")
    with pytest.raises(CarebenchError, match="duplicate"):
        load_annotations(p)
    q = tmp_path / "pol.jsonl"
    q.write_bytes(b'{"prompt_id": "\xff"}\n')
    with pytest.raises(CarebenchError, match="not UTF-8"):
        load_policies(q)


def test_review_and_criterion_sheets(tmp_path):
    p = tmp_path / "rev.csv"
    p.write_text(
        "item_id,reviewer,severity_preserved,no_leakage,format_ok,factual,persona_fit,style,context_fit,naturalness\n"
        "r1,A,yes,no,yes,5,4,3,4,5\nr2,A,yes,yes,yes,6,4,3,4,5\n", "utf-8")
    with pytest.raises(CarebenchError, match=r"line 3: field 'factual'"):
        load_reviews(p)
    q = tmp_path / "lab.jsonl"
    q.write_text(json.dumps({"task_id": 3, "response_id": "m#0", "criterion_id": "c1", "rater": "r",
                             "met": "no"}) + "\n", "utf-8")
    (lab,) = load_criterion_labels(q)
    assert lab.task_id == "3" and lab.met is False

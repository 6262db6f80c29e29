"""Task schema, loaders (JSONL/CSV/Parquet), validation errors and the §A.3 split."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pandas as pd
import pytest

from carebench.criteria import DIMENSIONS
from carebench.support.tasks import (
    KNOWN_SUBCATEGORIES,
    SPLIT_STRATA,
    Task,
    load_subcategories,
    load_tasks,
    stratified_split,
    unexpected_subcategories,
    with_split,
    write_tasks,
)
from carebench.types import CarebenchError


def _row(tid="t1", **over):
    row = {
        "id": tid, "subcategory": "nssi",
        "metadata": {"age_band": "U18", "turn_structure": "single", "harm_intent": "harmful",
                     "progression_stage": "action", "signal_directness": "explicit"},
        "turns": ["hello"],
        "criteria": [{"id": f"c{i}", "text": f"does {i}", "dimension": DIMENSIONS[i % 7], "weight": i + 1}
                     for i in range(6)],
        "reference": "ref",
    }
    row.update(over)
    return row


def test_builtin_sample_is_a_valid_illustrative_set():
    tasks = load_tasks("builtin:sample")
    assert 8 <= len(tasks) <= 12
    assert all(t.illustrative for t in tasks)
    assert len({t.subcategory for t in tasks}) >= 6
    multi = [t for t in tasks if t.multi_turn]
    assert multi and all(2 <= len(t.turns) <= 3 for t in multi)
    assert any(not t.multi_turn for t in tasks)
    for t in tasks:
        assert 6 <= len(t.criteria) <= 20
        assert all(1 <= c.weight <= 20 and c.dimension in DIMENSIONS for c in t.criteria)
        assert len({c.dimension for c in t.criteria}) >= 5
        assert t.reference.strip()
        assert t.metadata.split in ("public", "private")
    assert sum(c.negative for t in tasks for c in t.criteria) >= 5
    assert {c.dimension for t in tasks for c in t.criteria} == set(DIMENSIONS)


#: 23 subcategory names of a user's own task set, none of them among the paper's examples.
USER_SUBCATEGORIES = [
    "Housing Insecurity", "Job Loss", "Caregiver Burnout", "Chronic Pain", "Gambling Debt",
    "Veteran Transition", "Farm Stress", "Postpartum", "Bullying Online", "Exam Failure",
    "Divorce", "Migration Stress", "Incarceration", "Disability Onset", "Grief Sudden Loss",
    "Gender Identity", "Sexual Orientation", "Substance Relapse", "Domestic Violence",
    "Elder Isolation", "Cyberstalking", "Medical Diagnosis", "Academic Misconduct",
]


def test_any_subcategory_name_loads_normalised(tmp_path):
    """Real task sets carry their own names: every one loads; spellings that differ only
    in case and punctuation are one subcategory (the keys below are written out by hand)."""
    p = tmp_path / "t.jsonl"
    rows = [_row(f"t{i}", subcategory=name) for i, name in enumerate(USER_SUBCATEGORIES)]
    rows.append(_row("t-dup", subcategory="  self-Worth "))
    rows.append(_row("t-dup2", subcategory="Self Worth"))
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_tasks(p)
    assert len(tasks) == 25
    assert tasks[0].subcategory == "housing_insecurity" and tasks[14].subcategory == "grief_sudden_loss"
    assert tasks[23].subcategory == tasks[24].subcategory == "self_worth"
    assert len({t.subcategory for t in tasks}) == 24
    # the paper's names stay available as documentation, not as a gate
    assert "self_worth" in KNOWN_SUBCATEGORIES and "housing_insecurity" not in KNOWN_SUBCATEGORIES
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_row(subcategory=" -- ")) + "\n")
    with pytest.raises(CarebenchError, match=r"bad.jsonl:1: field subcategory"):
        load_tasks(bad)


def test_expected_subcategory_file_flags_names_outside_it(tmp_path):
    f = tmp_path / "subcats.txt"
    f.write_text("# our taxonomy\nHousing Insecurity\njob-loss  # comment\n\nself_worth\n")
    assert load_subcategories(f) == ["housing_insecurity", "job_loss", "self_worth"]
    tasks = [Task.model_validate(_row(f"t{i}", subcategory=s))
             for i, s in enumerate(["Housing insecurity", "Farm Stress", "farm_stress", "Self Worth"])]
    assert unexpected_subcategories(tasks, load_subcategories(f)) == {"farm_stress": 2}
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(CarebenchError, match="no subcategory names"):
        load_subcategories(empty)


def test_dimension_aliases_and_user_turns_from_messages(tmp_path):
    row = _row(turns=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "old reply"},
                      {"role": "user", "content": "b"}])
    row["metadata"]["turn_structure"] = "multi"
    row["criteria"][0]["dimension"] = "De-escalation"
    row["criteria"][1]["dimension"] = "recognition/identification"
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(row) + "\n")
    (t,) = load_tasks(p)
    assert t.turns == ("a", "b")  # responders regenerate assistant turns ...
    assert t.scripted_replies == ("old reply",)  # ... but the scripted one is kept for the reference and report
    assert t.scripted_conversation("ref") == [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "old reply"},
        {"role": "user", "content": "b"}, {"role": "assistant", "content": "ref"}]
    assert t.criteria[0].dimension == "deescalation" and t.criteria[1].dimension == "recognition"
    # round trip through the run directory's copy
    out = tmp_path / "copy.jsonl"
    write_tasks(out, [t])
    assert load_tasks(out) == [t]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "assistant", "content": "x"}, {"role": "user", "content": "a"}], "must follow a user message"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "x"}], "put the reply to the last"),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "x"},
          {"role": "user", "content": "c"}], "no scripted reply between"),
        ([{"role": "user", "content": "a"}, {"role": "system", "content": "x"}], "role must be"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "b"},
          {"role": "user", "content": "c"}], "1 scripted assistant replies for 3 user turns"),
    ],
)
def test_scripted_assistant_turns_must_sit_between_user_turns(tmp_path, messages, message):
    row = _row(turns=messages)
    row["metadata"]["turn_structure"] = "multi" if sum(m["role"] == "user" for m in messages) > 1 else "single"
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(CarebenchError, match=rf"t.jsonl:1: field turns: .*({message})"):
        load_tasks(p)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r["criteria"][2].update(weight=21), "2: field criteria.2.weight"),
        (lambda r: r["criteria"][0].update(dimension="vibes"), "field criteria.0.dimension"),
        (lambda r: r.update(criteria=r["criteria"][:5]), "6-20 criteria"),
        (lambda r: r["criteria"][1].update(id="c0"), "duplicate criterion id"),
        (lambda r: r.update(turns=["a", "b"]), "turn_structure"),
        (lambda r: r.update(subcategory="  --  "), "field subcategory"),
        (lambda r: r.update(id="t1"), "duplicate task id"),
    ],
)
def test_invalid_rows_name_file_line_and_field(tmp_path, mutate, message):
    bad = _row("t2")
    mutate(bad)
    p = tmp_path / "tasks.jsonl"
    p.write_text(json.dumps(_row("t1")) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(CarebenchError) as e:
        load_tasks(p)
    assert f"{p}:2" in str(e.value) and message in str(e.value)


def test_csv_and_parquet_rows(tmp_path):
    rows = [_row("a"), _row("b", turns=["x", "y"])]
    rows[1]["metadata"]["turn_structure"] = "multi"
    flat = []
    for r in rows:
        f = {k: v for k, v in r.items() if k != "metadata"}
        f.update(r["metadata"])
        f["turns"] = json.dumps(f["turns"])
        f["criteria"] = json.dumps(f["criteria"])
        flat.append(f)
    p = tmp_path / "t.csv"
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(flat[0]))
        w.writeheader()
        w.writerows(flat)
    tasks = load_tasks(p)
    assert [t.id for t in tasks] == ["a", "b"] and tasks[1].turns == ("x", "y")
    assert tasks[0].metadata.age_band == "U18"
    pq = tmp_path / "t.parquet"
    pd.DataFrame(flat).to_parquet(pq)
    assert [t.model_dump() for t in load_tasks(pq)] == [t.model_dump() for t in tasks]


def test_unknown_builtin_and_missing_file():
    with pytest.raises(CarebenchError, match=r"unknown built-in support task set .nothing.; known: sample$"):
        load_tasks("builtin:nothing")
    with pytest.raises(CarebenchError, match="not found"):
        load_tasks("/nonexistent/tasks.jsonl")


def _synthetic(n: int, seed: int = 0) -> list[Task]:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        r = _row(f"t{i:04d}", subcategory=f"sub{int(rng.integers(23))}")
        r["metadata"].update(age_band=str(rng.choice(["U18", "O18"])),
                             harm_intent=str(rng.choice(["harmful", "borderline"])),
                             progression_stage=str(rng.choice(["ideation", "planning", "action", "post_action"])))
        if rng.random() < 0.58:
            r["turns"] = ["a", "b", "c"]
            r["metadata"]["turn_structure"] = "multi"
        out.append(Task.model_validate(r))
    return out


def test_stratified_split_is_even_overall_and_within_strata():
    tasks = _synthetic(718)
    split = stratified_split(tasks, seed=12345)
    assert Counter(split.values()) == {"public": 359, "private": 359}
    strata: dict[tuple, Counter] = {}
    for t in tasks:
        key = (t.subcategory, *(getattr(t.metadata, s) for s in SPLIT_STRATA[1:]))
        strata.setdefault(key, Counter())[split[t.id]] += 1
    assert all(abs(c["public"] - c["private"]) <= 1 for c in strata.values())
    # each marginal axis stays close to 50/50 too
    for axis in ("turn_structure", "age_band"):
        by = Counter((getattr(t.metadata, axis), split[t.id]) for t in tasks)
        for v in {getattr(t.metadata, axis) for t in tasks}:
            total = by[(v, "public")] + by[(v, "private")]
            assert abs(by[(v, "public")] - total / 2) <= 0.1 * total
    assert stratified_split(tasks, seed=12345) == split
    assert stratified_split(tasks, seed=1) != split
    assert {t.metadata.split for t in with_split(tasks, split)} == {"public", "private"}


def test_select_split_uses_the_file_or_the_stratified_split():
    from carebench.support.tasks import select_split

    tasks = _synthetic(60)  # no split in the "file"
    public, source = select_split(tasks, "public")
    expected = stratified_split(tasks, seed=12345)
    assert source == "stratified, seed 12345"
    assert [t.id for t in public] == [t.id for t in tasks if expected[t.id] == "public"]
    assert all(t.metadata.split == "public" for t in public)
    assert len(select_split(tasks, "all")[0]) == 60
    marked = with_split(tasks, {t.id: ("private" if i < 5 else "public") for i, t in enumerate(tasks)})
    private, source = select_split(marked, "private")
    assert source == "file" and [t.id for t in private] == [t.id for t in tasks[:5]]
    with pytest.raises(CarebenchError, match="--split must be"):
        select_split(tasks, "secret")


def test_task_rows_without_a_system_prompt_hash_as_before_the_field_existed():
    """``Task.system_prompt`` (HealthBench-style files) is left out of a row when empty, so
    the built-in sample's dataset hash, which compare checks across runs, is the one the
    code before the field gave (computed with that code)."""
    from carebench.engine.rundir import data_sha256

    rows = [t.to_row() for t in load_tasks("builtin:sample")]
    assert all("system_prompt" not in r for r in rows)
    assert data_sha256(rows) == "fd108fdf27c57ab668f0667bc090c7f0870a9f4e442edc856a6bee2b47648db0"


def test_duplicate_id_names_both_lines_and_an_empty_file_says_so(tmp_path):
    p = tmp_path / "tasks.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in (_row("t1"), _row("t2"), _row("t1"))))
    with pytest.raises(CarebenchError) as e:
        load_tasks(p)
    assert str(e.value) == f"{p}:3: field id: duplicate task id 't1' (first on line 1)"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(CarebenchError) as e:
        load_tasks(empty)
    assert str(e.value) == f"{empty}: no tasks found"

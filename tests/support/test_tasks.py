"""Task schema, loaders (JSONL/CSV/Parquet), validation errors and the §A.3 split."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pandas as pd
import pytest

from carebench.support.tasks import (
    DIMENSIONS,
    SPLIT_STRATA,
    SUBCATEGORIES,
    Task,
    load_tasks,
    stratified_split,
    with_split,
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
    assert {t.subcategory for t in tasks} <= set(SUBCATEGORIES)
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


def test_len_subcategories_is_23():
    assert len(SUBCATEGORIES) == 23 == len(set(SUBCATEGORIES))


def test_dimension_aliases_and_user_turns_from_messages(tmp_path):
    row = _row(turns=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "old reply"},
                      {"role": "user", "content": "b"}])
    row["metadata"]["turn_structure"] = "multi"
    row["criteria"][0]["dimension"] = "De-escalation"
    row["criteria"][1]["dimension"] = "recognition/identification"
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(row) + "\n")
    (t,) = load_tasks(p)
    assert t.turns == ("a", "b")  # assistant turns are regenerated, never kept
    assert t.criteria[0].dimension == "deescalation" and t.criteria[1].dimension == "recognition"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r["criteria"][2].update(weight=21), "2: field criteria.2.weight"),
        (lambda r: r["criteria"][0].update(dimension="vibes"), "field criteria.0.dimension"),
        (lambda r: r.update(criteria=r["criteria"][:5]), "6-20 criteria"),
        (lambda r: r["criteria"][1].update(id="c0"), "duplicate criterion id"),
        (lambda r: r.update(turns=["a", "b"]), "turn_structure"),
        (lambda r: r.update(subcategory="astrology"), "field subcategory"),
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
    with pytest.raises(CarebenchError, match="available: sample"):
        load_tasks("builtin:nothing")
    with pytest.raises(CarebenchError, match="not found"):
        load_tasks("/nonexistent/tasks.jsonl")


def _synthetic(n: int, seed: int = 0) -> list[Task]:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        r = _row(f"t{i:04d}", subcategory=SUBCATEGORIES[int(rng.integers(23))])
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

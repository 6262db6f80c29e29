"""Risk loaders: generic files, the gaur and clinician-sentences formats, built-in sample."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from carebench.risk.data import GAUR_CUT_LENGTH, load_dataset, recover_post_list
from carebench.risk.scale import LEVEL_NAMES, farthest_level, letter_to_level, to_level
from carebench.types import CarebenchError

GAUR = Path(__file__).resolve().parents[3] / "shared/data/gaur2019/500_Reddit_users_posts_labels.csv"


# ----------------------------------------------------------------------------- scale


def test_level_conversions_and_farthest():
    assert [to_level(v) for v in (0, "1", "Behavior", "attempt", "d", 2.0, "3.0")] == [0, 1, 2, 3, 3, 2, 3]
    assert letter_to_level("C") == 2
    for bad in (4, -1, "severe", 1.5, True):
        with pytest.raises(CarebenchError):
            to_level(bad)
    # farthest level on 0..3: 0->3, 1->3, 2->0, 3->0 (distance 3, 2, 2, 3)
    assert [farthest_level(g) for g in range(4)] == [3, 3, 0, 0]


# ----------------------------------------------------------------------------- generic


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_generic_jsonl_csv_parquet_agree(tmp_path):
    rows = [
        {"id": "a", "text": "first", "level": "Indicator", "group": "u1", "self_harm": 0.1,
         "self_harm_intent": 0.05, "self_harm_instructions": 0.0},
        {"id": "b", "text": "second,\nwith a newline", "level": 3, "group": "u1"},
        {"id": "c", "text": "third", "level": "b"},
    ]
    j = tmp_path / "d.jsonl"
    j.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cols = ["id", "text", "level", "group", "self_harm", "self_harm_intent", "self_harm_instructions"]
    c = _write_csv(tmp_path / "d.csv", cols, [[r.get(k, "") for k in cols] for r in rows])
    import pandas as pd

    p = tmp_path / "d.parquet"
    pd.DataFrame([{**r, "level": str(r["level"])} for r in rows]).to_parquet(p)
    for path in (j, c, p):
        ds = load_dataset(path)
        assert [it.id for it in ds.items] == ["a", "b", "c"]
        assert [it.level for it in ds.items] == [0, 3, 1]
        assert ds.items[1].text == "second,\nwith a newline"
        assert ds.items[0].scores == {"self_harm": 0.1, "self_harm_intent": 0.05,
                                      "self_harm_instructions": 0.0}
        assert ds.items[1].scores == {}
        assert ds.items[0].group == "u1" and ds.items[2].group is None
        assert ds.label_counts == {"Indicator": 1, "Ideation": 1, "Behavior": 0, "Attempt": 1}


def test_invalid_rows_name_file_line_and_field(tmp_path):
    j = tmp_path / "bad.jsonl"
    j.write_text('{"id": "a", "text": "ok", "level": 1}\n\n{"id": "b", "text": "x", "level": "severe"}\n')
    with pytest.raises(CarebenchError, match=r"bad\.jsonl: line 3: field 'level'"):
        load_dataset(j)
    c = _write_csv(tmp_path / "bad.csv", ["id", "text", "level"],
                   [["a", "multi\nline", "0"], ["b", "", "1"]])
    with pytest.raises(CarebenchError, match=r"bad\.csv: line 4: field 'text'"):  # record 2 starts at line 4
        load_dataset(c)
    s = tmp_path / "score.jsonl"
    s.write_text('{"id": "a", "text": "t", "level": 0, "self_harm": 1.5}\n')
    with pytest.raises(CarebenchError, match="line 1: field 'self_harm'"):
        load_dataset(s)
    d = tmp_path / "dup.jsonl"
    d.write_text('{"id": "a", "text": "t", "level": 0}\n{"id": "a", "text": "u", "level": 1}\n')
    with pytest.raises(CarebenchError, match="duplicate id 'a'"):
        load_dataset(d)
    with pytest.raises(CarebenchError, match="not found"):
        load_dataset(tmp_path / "missing.csv")


# ----------------------------------------------------------------------------- gaur


def _gaur_literal(posts: list[str]) -> str:
    return repr(posts)


def test_recover_post_list_keeps_complete_posts_only():
    posts = ["first post here", 'a "quoted", post', "it's got an apostrophe", "last one is long " * 50]
    lit = _gaur_literal(posts)
    assert recover_post_list(lit) == (posts, False)
    cut = lit[: lit.index("last one") + 30]  # cut inside the last post
    got, recovered = recover_post_list(cut)
    assert recovered and got == posts[:3]
    with pytest.raises(ValueError):
        recover_post_list("['never closed")


def test_gaur_loader_on_synthetic_csv(tmp_path):
    long_posts = [f"post number {i} " + "words " * 400 for i in range(20)]
    truncated = _gaur_literal(long_posts)[:GAUR_CUT_LENGTH]
    assert len(truncated) == GAUR_CUT_LENGTH
    rows = [
        ["user-0", _gaur_literal(["I am here for you", "call someone"]), "Supportive"],
        ["user-1", _gaur_literal(["my friend worries me"]), "Indicator"],
        ["user-2", truncated, "Ideation"],
        ["user-3", _gaur_literal(["one", "two"]), "Behavior"],
        ["user-4", _gaur_literal(["final"]), "Attempt"],
    ]
    path = _write_csv(tmp_path / "gaur.csv", ["User", "Post", "Label"], rows)
    ds = load_dataset(path)  # format detected from the header
    assert ds.format == "gaur"
    assert [it.level for it in ds.items] == [0, 0, 1, 2, 3]  # Supportive -> Indicator
    assert [it.group for it in ds.items] == [f"user-{i}" for i in range(5)]
    assert ds.items[0].text == "I am here for you\n\ncall someone"
    rec = ds.items[2]
    assert rec.meta["recovered"] is True and rec.meta["truncated_at"] == GAUR_CUT_LENGTH
    # exactly the posts that ended before the cut survive
    complete = [p for i, p in enumerate(long_posts) if len(_gaur_literal(long_posts[: i + 1])) - 1 <= GAUR_CUT_LENGTH]
    assert rec.text.split("\n\n") == [p.strip() for p in complete]
    assert ds.meta["recovered_rows"] == 1 and ds.meta["recovered_ids"] == ["user-2"]
    assert not ds.items[0].meta.get("recovered")
    bad = _write_csv(tmp_path / "g2.csv", ["User", "Post", "Label"],
                     [["u", _gaur_literal(["x"]), "Severe"]])
    with pytest.raises(CarebenchError, match="line 2: field 'Label'"):
        load_dataset(bad, "gaur")


# ----------------------------------------------------------------------------- clinician


def test_clinician_sentences_mapping_and_unknown_category(tmp_path):
    cats = {
        "clearly_happy": 0, "clearly_neutral": 0, "clearly_sad": 0, "clearly_angry": 0,
        "passive_si": 1, "active_si_no_plan": 1, "active_si_plan_no_intent": 2,
        "active_si_plan_with_intent": 2, "active_si_plan_with_intent_prep": 3,
    }
    rows = [[c, f"statement for {c}", "ignored"] for c in cats]
    rows.insert(3, ["ambiguous_emotional", "cannot tell", "ignored"])
    path = _write_csv(tmp_path / "sent.csv", ["Safety type", "statement", "other"], rows)
    ds = load_dataset(path)
    assert ds.format == "clinician-sentences"
    assert len(ds.items) == 9 and ds.meta["dropped_ambiguous"] == 1
    assert {it.text: it.level for it in ds.items} == {f"statement for {c}": lvl for c, lvl in cats.items()}
    rows.append(["clearly_confused", "x", ""])
    bad = _write_csv(tmp_path / "bad.csv", ["Safety type", "statement", "other"], rows)
    with pytest.raises(CarebenchError, match=r"line 12: field 'Safety type': unknown category 'clearly_confused'"):
        load_dataset(bad, "clinician-sentences")


# ----------------------------------------------------------------------------- built-in


def test_builtin_sample_is_balanced_and_illustrative():
    ds = load_dataset("builtin:sample")
    assert ds.illustrative and "illustrative" in ds.notes[0].lower()
    assert 40 <= len(ds.items) <= 60
    counts = list(ds.label_counts.values())
    assert len(set(counts)) == 1 and list(ds.label_counts) == list(LEVEL_NAMES)
    assert all(set(it.scores) == {"self_harm", "self_harm_intent", "self_harm_instructions"}
               for it in ds.items)
    with pytest.raises(CarebenchError, match="unknown built-in"):
        load_dataset("builtin:nope")


@pytest.mark.shared_data
@pytest.mark.skipif(not GAUR.is_file(), reason="shared gaur2019 data not present")
def test_gaur_shared_file_counts():
    ds = load_dataset(GAUR, "gaur")
    assert len(ds.items) == 500
    assert ds.label_counts == {"Indicator": 207, "Ideation": 171, "Behavior": 77, "Attempt": 45}
    assert ds.meta["recovered_rows"] == 28
    assert sum(1 for it in ds.items if it.meta.get("recovered")) == 28

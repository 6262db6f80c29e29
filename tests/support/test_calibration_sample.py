"""The stratified calibration draw (DistressBench B.1, E.8) and its labelling sheet."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from test_tasks import _row

from carebench.cli import main
from carebench.datasets.sheets import CriterionLabel, load_criterion_items
from carebench.support.calibration import load_labels
from carebench.support.calibration_sample import draw_tasks, sheet_rows
from carebench.support.records import ResponseRecord
from carebench.support.tasks import Task, write_tasks
from carebench.types import CarebenchError

#: (subcategory, turn structure) -> number of tasks; 40 in all
SIZES = {("a", "multi"): 8, ("a", "single"): 12, ("b", "multi"): 6, ("b", "single"): 6, ("c", "single"): 8}


def _tasks() -> list[Task]:
    out = []
    for (sub, ts), k in SIZES.items():
        for i in range(k):
            r = _row(f"{sub}-{ts}-{i:02d}", subcategory=sub)
            if ts == "multi":
                r["turns"] = ["one", "two"]
                r["metadata"]["turn_structure"] = "multi"
            out.append(Task.model_validate(r))
    return out


def test_draw_allocates_proportionally_and_is_reproducible():
    tasks = _tasks()
    drawn, info = draw_tasks(tasks, n=10, seed=20260714)
    got = Counter((t.subcategory, t.metadata.turn_structure) for t in drawn)
    # quotas 10 * size / 40 = 2, 3, 1.5, 1.5, 2: the one seat left goes to one of the two 1.5s
    assert got[("a", "multi")] == 2 and got[("a", "single")] == 3 and got[("c", "single")] == 2
    assert sorted([got[("b", "multi")], got[("b", "single")]]) == [1, 2]
    assert len(drawn) == len({t.id for t in drawn}) == 10
    assert info["task_ids"] == [t.id for t in drawn] and info["seed"] == 20260714
    assert draw_tasks(tasks, n=10, seed=20260714)[1] == info
    assert {t.id for t in draw_tasks(tasks, n=10, seed=1)[0]} != {t.id for t in drawn}
    # one stratum axis only: 10 over a=20, b=12, c=8 -> 5, 3, 2
    by_sub = Counter(t.subcategory for t in draw_tasks(tasks, n=10, strata=["subcategory"])[0])
    assert by_sub == {"a": 5, "b": 3, "c": 2}
    with pytest.raises(CarebenchError, match="cannot draw 41"):
        draw_tasks(tasks, n=41)
    with pytest.raises(CarebenchError, match="unknown stratum"):
        draw_tasks(tasks, n=5, strata=["colour"])


def _responses(tasks):
    out = []
    for t in tasks:
        for a in range(4):
            turns = []
            for k, u in enumerate(t.turns):
                turns += [{"role": "user", "content": u}, {"role": "assistant", "content": f"{t.id} a{a} turn {k + 1}",
                                                           "status": "ok", "latency_s": 0.1}]
            out.append(ResponseRecord(t.id, "openai:m", a, turns, turns[-1]["content"], "ok"))
        out.append(ResponseRecord(t.id, "openai:m", 4, [], "", "empty"))  # a blank: nothing to label
        out.append(ResponseRecord(t.id, "openai:m", 5, [], "", "incomplete"))  # a harness failure
        out.append(ResponseRecord(t.id, "reference", 0, [{"role": "user", "content": "x"},
                                                          {"role": "assistant", "content": "ref"}], "ref", "ok"))
    return out


def test_sheet_has_every_criterion_of_the_drawn_replies(tmp_path):
    tasks = _tasks()
    drawn, _ = draw_tasks(tasks, n=6, seed=20260714)
    rows = sheet_rows(drawn, _responses(drawn), replies_per_task=3)
    assert len(rows) == 6 * 3 * 6  # tasks x replies x criteria
    assert {r.response_id.rsplit("#", 1)[1] for r in rows} <= {"0", "1", "2", "3"}  # never blank/failed/reference
    multi = next(r for r in rows if r.task_id.startswith(("a-multi", "b-multi")))
    assert [m["role"] for m in multi.conversation] == ["user", "assistant", "user"]
    assert multi.reply.endswith("turn 2") and multi.reply not in str(multi.conversation)
    p = tmp_path / "sheet.jsonl"
    from carebench.datasets.records import write_jsonl

    write_jsonl(p, rows)
    assert load_criterion_items(p) == rows
    # what the annotate app exports for these rows is what `support calibrate --labels` reads
    labels = [CriterionLabel(task_id=r.task_id, response_id=r.response_id, criterion_id=r.criterion_id,
                             rater="clin1", met=True) for r in rows]
    lp = tmp_path / "labels.jsonl"
    write_jsonl(lp, labels)
    frame = load_labels(lp)
    assert len(frame) == len(rows) and set(frame["responder"]) == {"openai:m"}


def test_calibration_sample_command(tmp_path, capsys):
    tasks = _tasks()
    src = tmp_path / "tasks.jsonl"
    write_tasks(src, tasks)
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"suite": "support"}))
    write_tasks(run / "tasks.jsonl", tasks)
    (run / "records.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in _responses(tasks)))
    out = tmp_path / "sample"
    assert main(["support", "calibration-sample", "--tasks", str(src), "--n", "10", "--run", str(run),
                 "--out", str(out)]) == 0
    info = json.loads((out / "calibration_sample.json").read_text())
    assert info["seed"] == 20260714 and info["n"] == 10 and info["sheet_rows"] == 10 * 4 * 6
    assert info["task_ids"] == [t.id for t in draw_tasks(tasks, n=10)[0]]
    assert len(load_criterion_items(out / "criterion_sheet.jsonl")) == 240
    assert main(["support", "calibration-sample", "--tasks", str(src), "--n", "99", "--out", str(out)]) == 2
    assert "cannot draw 99" in capsys.readouterr().err

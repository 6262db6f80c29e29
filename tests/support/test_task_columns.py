"""Support task files take the same --columns mapping as risk data (issue 10, item 10)."""

from __future__ import annotations

import json

import pytest

from carebench.criteria import DIMENSIONS
from carebench.support.tasks import load_tasks
from carebench.types import CarebenchError


def test_support_task_files_take_the_same_mapping(tmp_path):
    row = {"case": "t1", "kind": "nssi", "messages": ["I cut again last night"],
           "criteria": [{"id": f"c{i}", "text": f"does {i}", "dimension": DIMENSIONS[i % 7],
                         "weight": i + 1} for i in range(6)]}
    p = tmp_path / "tasks.jsonl"
    p.write_text(json.dumps(row) + "\n")
    [task] = load_tasks(p, columns="id=case,subcategory=kind,turns=messages")
    assert task.id == "t1" and task.turns == ("I cut again last night",)
    del row["case"]
    p.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    tasks = load_tasks(p, columns="subcategory=kind,turns=messages")  # ids: row numbers
    assert [t.id for t in tasks] == ["1", "2"]
    with pytest.raises(CarebenchError, match="no column 'case'"):
        load_tasks(p, columns="id=case,subcategory=kind,turns=messages")

"""docs/support.md "Bring your own tasks": its complete example is a task `support run`
accepts, and its tables name every task and criterion field the loader knows."""

from __future__ import annotations

import json
from pathlib import Path

from carebench.criteria import DIMENSIONS, Criterion
from carebench.support.tasks import META_FIELDS, Task, load_tasks

DOC = Path(__file__).parents[2] / "docs" / "support.md"


def _section() -> str:
    text = DOC.read_text("utf-8")
    return text.split("## Bring your own tasks", 1)[1].split("\n## ", 1)[0]


def test_the_example_task_loads(tmp_path):
    example = _section().split("```json", 1)[1].split("```", 1)[0]
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(json.loads(example)) + "\n", "utf-8")
    (task,) = load_tasks(path)
    assert task.id == "my-task-01" and task.subcategory == "self_worth"
    assert {c.dimension for c in task.criteria} == set(DIMENSIONS)  # the example uses all seven
    assert any(c.negative for c in task.criteria)


def test_every_field_is_documented():
    section = _section()
    fields = [f for f in Task.model_fields if f not in ("illustrative", "scripted_replies")]
    for f in (*fields, *Criterion.model_fields, *META_FIELDS, *DIMENSIONS):
        assert f"`{f}`" in section, f
    assert "6 to 20 criteria" in section and "1 to 20" in section

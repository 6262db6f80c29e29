"""HealthBench-style task files for the support suite (``--format healthbench``).

A HealthBench row carries ``prompt_id``, ``prompt`` (chat messages), ``rubrics``
(``{criterion, points, tags}``) and ``example_tags``. It becomes a support
:class:`~carebench.support.tasks.Task`:

- system messages become the task's system prompt; user and assistant messages
  are the conversation, which must end in a user turn (assistant messages between
  user turns are scripted and never shown to responders, as for every task);
- a criterion's weight is ``|points|`` capped at 20 (support's 1-20 range),
  negative points make a negative criterion; the original points are kept in
  ``metadata.healthbench_points`` for HealthBench's own score (support.healthbench);
- the dimension comes from the criterion's first ``axis:NAME`` tag through an
  axis map (package default ``data/support/healthbench_axes.yaml``, replaceable);
- the subcategory is the value of the ``PREFIX:VALUE`` example tag for a chosen
  prefix (default ``theme``).

Every bad row stops loading with its file, line and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from carebench.criteria import MAX_WEIGHT, canonical_dimension
from carebench.datasets.builtin import package_file
from carebench.datasets.files import read_rows
from carebench.support.tasks import Task, load_tasks, unique_tasks
from carebench.types import CarebenchError

#: task file formats ``--format`` reads: carebench's own, or HealthBench-style JSONL
TASK_FORMATS = ("carebench", "healthbench")
DEFAULT_SUBCATEGORY_TAG = "theme"
AXIS_PREFIX = "axis:"
#: Key of the axis map giving the dimension of criteria with no listed axis.
FALLBACK_AXIS = "*"


def default_axes_map() -> Path:
    return package_file("support", "healthbench_axes.yaml")


def load_axes_map(path: str | Path | None = None) -> dict[str, str]:
    """Axis name -> support dimension, from a YAML file with an ``axes`` table."""
    p = Path(path) if path is not None else default_axes_map()
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except OSError as e:
        raise CarebenchError(f"cannot read axis map {p}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise CarebenchError(f"{p}: invalid YAML ({str(e).splitlines()[0]})") from None
    axes = data.get("axes") if isinstance(data, dict) else None
    if not isinstance(axes, dict) or not axes:
        raise CarebenchError(f"{p}: expected a table 'axes: {{AXIS: DIMENSION, ...}}'")
    out: dict[str, str] = {}
    for axis, dim in axes.items():
        try:
            out[str(axis).strip().lower()] = canonical_dimension(dim)
        except ValueError as e:
            raise CarebenchError(f"{p}: axis {axis!r}: {e}") from None
    return out


def load_task_source(source: str | Path, *, task_format: str = "carebench", columns: str | None = None,
                     axes_map: str | Path | None = None,
                     subcategory_tag: str = DEFAULT_SUBCATEGORY_TAG) -> list[Task]:
    """Every task of a task source in its ``--format``: carebench's own
    (:func:`carebench.support.tasks.load_tasks`, ``columns`` mapping allowed) or
    HealthBench-style JSONL (:func:`read_healthbench`, with ``axes_map`` and
    ``subcategory_tag``)."""
    if task_format not in TASK_FORMATS:
        raise CarebenchError(f"--format must be one of {', '.join(TASK_FORMATS)}, got {task_format!r}")
    if task_format == "carebench":
        if axes_map is not None:
            raise CarebenchError("--axes-map applies to --format healthbench only")
        return load_tasks(source, columns=columns)
    if columns:
        raise CarebenchError("--columns applies to carebench task files, not to --format healthbench")
    return read_healthbench(source, axes_map=axes_map, subcategory_tag=subcategory_tag)


def describe_format(axes_map: str | Path | None, subcategory_tag: str) -> str:
    """The run note naming how a HealthBench-style file was read."""
    return (f"tasks read as HealthBench-style JSONL (axis map "
            f"{axes_map or 'built-in healthbench_axes.yaml'}, subcategory from the "
            f"'{subcategory_tag}:' example tag)")


class _Bad(Exception):
    def __init__(self, field: str, msg: str):
        super().__init__(f"field {field}: {msg}")


def read_healthbench(path: str | Path, *, axes_map: str | Path | None = None,
                     subcategory_tag: str = DEFAULT_SUBCATEGORY_TAG) -> list[Task]:
    """Every row of a HealthBench-style JSONL file as a support task (see module doc)."""
    p = Path(path)
    if not p.is_file():
        raise CarebenchError(f"task file {p} not found")
    tag = subcategory_tag.strip().rstrip(":")
    if not tag:
        raise CarebenchError("--subcategory-tag must name a tag prefix (e.g. theme)")
    axes = load_axes_map(axes_map)

    def parsed() -> Iterator[tuple[str, Task]]:
        for loc, row in read_rows(p, "jsonl"):
            line = loc.split()[-1]
            try:
                task = _task(row, axes, tag)
            except _Bad as e:
                raise CarebenchError(f"{p}:{line}: {e}") from None
            yield line, task

    return unique_tasks(parsed(), p, id_field="prompt_id")


def _task(row: dict[str, Any], axes: dict[str, str], tag: str) -> Task:
    pid = row.get("prompt_id")
    if not isinstance(pid, str | int) or isinstance(pid, bool) or not str(pid).strip():
        raise _Bad("prompt_id", "required: a non-empty id")
    system, messages = _messages(row.get("prompt"))
    tags = row.get("example_tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _Bad("example_tags", "expected a list of tag strings")
    sub = next((t.split(":", 1)[1] for t in tags if t.split(":", 1)[0] == tag and ":" in t), None)
    if sub is None or not sub.strip():
        raise _Bad("example_tags", f"no '{tag}:VALUE' tag for the subcategory (choose another with --subcategory-tag)")
    criteria, points = _criteria(row.get("rubrics"), axes)
    users = sum(m["role"] == "user" for m in messages)
    raw = {
        "id": str(pid), "subcategory": sub, "turns": messages, "criteria": criteria, "system_prompt": system,
        "metadata": {"turn_structure": "multi" if users > 1 else "single",
                     "example_tags": list(tags), "healthbench_points": points},
    }
    try:
        return Task.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        parts = [str(x) for x in err.get("loc", ())] or ["rubrics"]  # the rubric-size check has no field
        parts[0] = {"turns": "prompt", "criteria": "rubrics", "id": "prompt_id"}.get(parts[0], parts[0])
        raise _Bad(".".join(parts), str(err.get("msg"))) from None


def _messages(prompt: Any) -> tuple[str, list[dict[str, str]]]:
    if not isinstance(prompt, list) or not prompt:
        raise _Bad("prompt", "expected a non-empty list of {role, content} messages")
    system: list[str] = []
    out: list[dict[str, str]] = []
    for i, m in enumerate(prompt):
        where = f"prompt[{i}]"
        if not isinstance(m, dict):
            raise _Bad(where, "expected a {role, content} message")
        role, content = m.get("role"), m.get("content")
        if not isinstance(content, str) or not content.strip():
            raise _Bad(f"{where}.content", "expected non-empty text")
        if role in ("system", "developer"):
            if out:
                raise _Bad(f"{where}.role", "a system message must come before the conversation")
            system.append(content)
        elif role in ("user", "assistant"):
            out.append({"role": role, "content": content})
        else:
            raise _Bad(f"{where}.role", f"expected system, user or assistant, got {role!r}")
    if not out or out[-1]["role"] != "user":
        raise _Bad("prompt", "the conversation must end in a user message (the reply to it is what is graded)")
    return "\n\n".join(system), out


def _criteria(rubrics: Any, axes: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    if not isinstance(rubrics, list) or not rubrics:
        raise _Bad("rubrics", "expected a non-empty list of {criterion, points, tags}")
    out: list[dict[str, Any]] = []
    points: dict[str, int] = {}
    for i, r in enumerate(rubrics):
        where = f"rubrics[{i}]"
        if not isinstance(r, dict):
            raise _Bad(where, "expected {criterion, points, tags}")
        text = r.get("criterion")
        if not isinstance(text, str) or not text.strip():
            raise _Bad(f"{where}.criterion", "expected non-empty text")
        pts = r.get("points")
        if isinstance(pts, float) and pts.is_integer():
            pts = int(pts)
        if not isinstance(pts, int) or isinstance(pts, bool):
            raise _Bad(f"{where}.points", f"expected a whole number, got {pts!r}")
        if pts == 0:
            raise _Bad(f"{where}.points", "0 points: a criterion must count for or against the reply")
        tags = r.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise _Bad(f"{where}.tags", "expected a list of tag strings")
        axis = next((t[len(AXIS_PREFIX):].strip().lower() for t in tags if t.startswith(AXIS_PREFIX)), None)
        dim = axes.get(axis) if axis is not None else None
        if dim is None:
            dim = axes.get(FALLBACK_AXIS)
        if dim is None:
            what = f"axis {axis!r} is not in the axis map" if axis is not None else "no 'axis:NAME' tag"
            raise _Bad(f"{where}.tags", f"{what} (add it, or a '*' entry, to the --axes-map file)")
        cid = f"c{i + 1}"
        out.append({"id": cid, "text": text, "dimension": dim, "weight": min(abs(pts), MAX_WEIGHT),
                    "negative": pts < 0})
        points[cid] = pts
    return out, points

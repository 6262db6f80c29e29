"""A carebench task's bad input under ``inspect eval``: one line naming the task, no traceback;
from Python, a ``CarebenchError`` with the same line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_harness import need_inspect, scripted_model

need_inspect()

from inspect_ai import eval as inspect_eval

from carebench.types import CarebenchError

CASES = [
    ("carebench/risk", ["-T", "data={tmp}/missing.jsonl"], "carebench/risk: data file not found: {tmp}/missing.jsonl"),
    ("carebench/risk", ["-T", "method=no-such-method"], "carebench/risk: unknown risk method 'no-such-method'"),
    ("carebench/risk", ["-T", "method=tfidf-lr"], "carebench/risk: risk method 'tfidf-lr' is not a one-call prompted"),
    ("carebench/support", ["-T", "tasks={tmp}/missing.jsonl"], "carebench/support: task file {tmp}/missing.jsonl not found"),
    ("carebench/converse", ["-T", "rubric={tmp}/missing.tsv"], "carebench/converse: {tmp}/missing.tsv: rubric file not found"),
    # brackets are printed as they are (Inspect's printer would read them as markup)
    ("carebench/converse", ["-T", "rubric_rules=vera+[bold]x"],
     "carebench/converse: unknown rubric rule '[bold]x' in 'vera+[bold]x'"),
]


@pytest.mark.parametrize(("task", "args", "line"), CASES)
def test_the_cli_prints_one_line_and_no_traceback(tmp_path, task, args, line):
    inspect = Path(sys.executable).with_name("inspect")
    args = [a.format(tmp=tmp_path) for a in args]
    # a wide console: rich (Inspect's printer) would wrap a long line at 80 columns
    env = {**os.environ, "COLUMNS": "500"}
    out = subprocess.run([str(inspect), "eval", task, "--model", "mockllm/model", *args, "--log-dir",
                          str(tmp_path / "logs")], check=False, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "Traceback" not in text and "CarebenchError" not in text, text[-3000:]
    errors = [x for x in text.splitlines() if x.startswith(f"{task}: ") and "carebench under Inspect" not in x]
    assert len(errors) == 1, text[-3000:]
    assert errors[0].startswith(line.format(tmp=tmp_path)), errors[0]
    assert not list((tmp_path / "logs").glob("*.eval"))  # nothing half-written


def test_from_python_it_is_a_carebench_error(tmp_path):
    with pytest.raises(CarebenchError) as e:
        inspect_eval("carebench/risk", model=scripted_model(lambda m: "a"),
                     task_args={"data": str(tmp_path / "missing.jsonl")}, log_dir=str(tmp_path), display="none")
    assert str(e.value) == f"carebench/risk: data file not found: {tmp_path / 'missing.jsonl'}"

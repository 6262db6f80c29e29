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

ROLES = ["--model-role", "user=mockllm/model", "--model-role", "judge=mockllm/model"]
CASES = [
    ("carebench/risk", ["-T", "data={tmp}/missing.jsonl"], "carebench/risk: data file not found: {tmp}/missing.jsonl"),
    ("carebench/risk", ["-T", "method=no-such-method"], "carebench/risk: unknown risk method 'no-such-method'"),
    ("carebench/risk", ["-T", "method=tfidf-lr"], "carebench/risk: risk method 'tfidf-lr' is not a one-call prompted"),
    ("carebench/support", ["-T", "tasks={tmp}/missing.jsonl"], "carebench/support: task file {tmp}/missing.jsonl not found"),
    ("carebench/converse", [*ROLES, "-T", "rubric={tmp}/missing.tsv"], "carebench/converse: {tmp}/missing.tsv: rubric file not found"),
    # an unbound role would be the evaluated model itself (Inspect's fallback): refused
    ("carebench/converse", ["-T", "turns=1"], ("carebench/converse: bind the simulated user and the judge to models: "
     "--model-role user=PROVIDER/MODEL --model-role judge=PROVIDER/MODEL (the model under test is --model)")),
    ("carebench/support", ["--model-role", "judge=mockllm/model", "-T", "score=weighted"],
     "carebench/support: -T score must be one of carebench, healthbench, got 'weighted'"),
    ("carebench/support", ["--model-role", "judge=mockllm/model", "-T", "judges=judge,judge2"],
     "carebench/support: bind the judges to models: --model-role judge2=PROVIDER/MODEL (the model under test is --model)"),
    # brackets are printed as they are (Inspect's printer would read them as markup)
    ("carebench/converse", [*ROLES, "-T", "rubric_rules=vera+[bold]x"],
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


def test_tasks_are_found_when_a_stray_egg_info_hides_the_install(tmp_path):
    """A ``carebench.egg-info`` without PEP 610 data first on the path (a build's leftover in
    ``src/`` with ``PYTHONPATH=src``) made Inspect register bare task names; they are still
    ``carebench/...``."""
    import carebench

    stray = tmp_path / "path"
    (stray / "carebench.egg-info").mkdir(parents=True)
    (stray / "carebench.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: carebench\nVersion: 0.0.1\n")
    # as setuptools writes it beside the sources when it builds
    (stray / "carebench.egg-info" / "entry_points.txt").write_text("[inspect_ai]\ncarebench = carebench._registry\n")
    src = Path(carebench.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stray), str(src)]), "COLUMNS": "500"}
    code = "import importlib.metadata as m; print(m.distribution('carebench').version)"
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert probe.stdout.strip() == "0.0.1"  # the stray metadata is the one importlib.metadata finds
    inspect = Path(sys.executable).with_name("inspect")
    out = subprocess.run([str(inspect), "eval", "carebench/risk", "--model", "mockllm/model", "--limit", "2",
                          "--log-dir", str(tmp_path / "logs"), "--display", "plain"], check=False,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert len(list((tmp_path / "logs").glob("*.eval"))) == 1

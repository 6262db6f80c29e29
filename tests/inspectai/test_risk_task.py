"""``inspect eval carebench/risk``: the task runs offline and its metrics are carebench's.

The same scripted answers go to a carebench run (through the loopback stub server) and
to an Inspect run (through Inspect's mock model); the Inspect log's metrics must equal the
run's ``metrics.json``, intervals included (same bootstrap seed both sides), and the point
values must equal scikit-learn's on the answers the script gave.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from inspect_harness import need_inspect, scripted_model
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, mean_absolute_error

need_inspect()

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from carebench.cli import main
from carebench.engine.rundir import read_json
from carebench.risk.data import load_dataset
from carebench.risk.methods.llm import post_message
from carebench.risk.scoring import METRIC_KEYS
from carebench.types import CarebenchError
from stub_server import StubReply, StubServer

ITEMS = load_dataset("builtin:sample").items
BY_POST = {post_message(it.text): it for it in ITEMS}
#: what the script answers for the i-th item: the gold letter, a neighbour, a level name,
#: a letter with its name, and an answer that names no level (a parse failure)
FORMS = ("gold", "up", "name", "both", "none", "gold", "down")
NAMES = ("Indicator", "Ideation", "Behavior", "Attempt")


def scripted(item) -> tuple[str, int | None]:
    """(answer text, the level it names or None)."""
    i = ITEMS.index(item)
    form = FORMS[i % len(FORMS)]
    level = {"up": min(item.level + 1, 3), "down": max(item.level - 1, 0)}.get(form, item.level)
    if form == "none":
        return "I would rather not choose one.", None
    text = {"name": NAMES[level], "both": f"{'abcd'[level]}) {NAMES[level]}"}.get(form, "abcd"[level])
    return text, level


def _answer_messages(messages) -> str:
    return scripted(BY_POST[messages[-1].text])[0]


def _inspect_run(tmp_path: Path, **params):
    [log] = inspect_eval("carebench/risk", model=scripted_model(_answer_messages), task_args=params,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    return log


def _metrics(log) -> dict[str, float]:
    [score] = log.results.scores
    return {name: m.value for name, m in score.metrics.items()}


def test_metrics_equal_a_carebench_run_on_the_same_answers(tmp_path):
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content=scripted(BY_POST[req.body["messages"][-1]["content"]])[0])
        assert main(["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                     "--method", "llm", "--bootstrap", "300", "--seed", "7", "--out", str(out)]) == 0
    ours = read_json(out / "metrics.json")["methods"]["llm"]
    log = _inspect_run(tmp_path, data="builtin:sample", method="llm", bootstrap=300, seed=7)
    got = _metrics(log)
    assert log.results.total_samples == len(ITEMS)
    for name in METRIC_KEYS:
        assert got[name] == pytest.approx(ours[name]["value"], abs=1e-12), name
        assert [got[f"{name}_ci_low"], got[f"{name}_ci_high"]] == pytest.approx(ours[name]["ci"], abs=1e-12), name
    assert got["failures"] == ours["failures"] == sum(scripted(it)[1] is None for it in ITEMS)
    # and the point values are scikit-learn's on the script (a failure scored as the farthest level)
    gold = np.array([it.level for it in ITEMS])
    pred = np.array([lv if (lv := scripted(it)[1]) is not None else (3 if it.level < 2 else 0) for it in ITEMS])
    assert got["accuracy"] == pytest.approx(accuracy_score(gold, pred))
    assert got["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro", labels=[0, 1, 2, 3],
                                                     zero_division=0))
    assert got["qwk"] == pytest.approx(cohen_kappa_score(gold, pred, weights="quadratic"))
    assert got["mae"] == pytest.approx(mean_absolute_error(gold, pred))
    # the log says the seed, and that carebench's cap and cache did not apply
    meta = log.eval.metadata["carebench"]
    assert meta["seeds"]["bootstrap_seed"] == 7 and meta["budget_cap"] == "not applied"


def test_each_sample_holds_the_methods_prompt_and_its_record(tmp_path):
    log = _inspect_run(tmp_path, data="builtin:sample", method="llm-cot", bootstrap=20)
    first = next(s for s in log.samples if s.id == ITEMS[0].id)
    system = first.input[0].content
    assert "FINAL" in system and first.input[-1].content == post_message(ITEMS[0].text)
    # the script answers a letter without a FINAL line: chain of thought reads none, a parse failure
    record = first.scores["carebench/risk_letter"].metadata["record"]
    assert record["status"] == "parse_error" and record["pred"] is None


def test_a_fitted_method_is_refused_with_one_line(tmp_path):
    with pytest.raises(CarebenchError, match="not a one-call prompted method"):
        inspect_eval("carebench/risk", model=scripted_model(lambda m: "a"), task_args={"method": "tfidf-lr"},
                     log_dir=str(tmp_path / "logs"), display="none")


def test_the_cli_runs_offline_and_prints_carebenchs_metrics(tmp_path):
    inspect = Path(sys.executable).with_name("inspect")
    out = subprocess.run([str(inspect), "eval", "carebench/risk", "--model", "mockllm/model", "-T",
                          "data=builtin:sample", "--limit", "20", "--log-dir", str(tmp_path), "--display", "plain"],
                         check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    for name in METRIC_KEYS:
        assert f"\n{name} " in text and f"{name}_ci_low" in text
    assert "budget cap (--budget) and completion cache do not apply" in out.stderr
    # mockllm's fixed answer names no level: 20 failures, each scored as the farthest level
    [path] = tmp_path.glob("*.eval")
    got = _metrics(read_eval_log(str(path)))
    assert got["n_scored"] == got["failures"] == 20
    assert got["accuracy"] == got["adjacent_accuracy"] == 0.0

"""``carebench export inspect``: a demo's run directory (made offline against the loopback
stub) as one Inspect log per part, read back with Inspect's own ``read_eval_log``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from inspect_harness import need_inspect

need_inspect()

from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.scorer import CORRECT

from carebench.cli import main
from carebench.inspect.log import INSPECT_LOG_VERSION
from carebench.report.banners import ILLUSTRATIVE, TEXT
from stub_server import StubServer
from test_demo_workers import PARTS, _answer, _no_embedding


@pytest.fixture(scope="module")
def demo_logs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("demo")
    mp = pytest.MonkeyPatch()
    _no_embedding(mp)
    try:
        with StubServer() as stub:
            stub.handler = _answer
            assert main(["demo", "--model", f"openai:stub@{stub.base_url}", "--out", str(root / "demo"),
                         "--jobs", "1", "--cache", str(root / "cache.sqlite")]) == 0
    finally:
        mp.undo()
    assert main(["export", "inspect", str(root / "demo"), "--out", str(root / "logs")]) == 0
    return root / "demo", root / "logs"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_one_log_per_part_with_a_sample_per_record(demo_logs):
    demo, logs = demo_logs
    assert sorted(p.name for p in logs.glob("*.eval")) == sorted(f"{p}.eval" for p in PARTS)
    for part in PARTS:
        log = read_eval_log(str(logs / f"{part}.eval"))
        records = _lines(demo / part / "records.jsonl")
        assert len(log.samples) == len(records) > 0, part
        assert [s.metadata["record"] for s in log.samples] == records, part
        assert TEXT[ILLUSTRATIVE] in log.eval.metadata["carebench"]["banners"], part


def test_scores_and_explanations_are_the_records(demo_logs):
    demo, logs = demo_logs
    risk = read_eval_log(str(logs / "risk.eval"))
    records = _lines(demo / "risk" / "records.jsonl")
    right = sum(r["pred"] is not None and r["pred"] == r["gold"] for r in records)
    assert sum(s.scores["level"].value == CORRECT for s in risk.samples) == right
    # the negative stratum has no gold level (gold null): no target letter
    assert [s.target for s in risk.samples] == ["abcd"[r["gold"]] if r["gold"] is not None else "" for r in records]
    support = read_eval_log(str(logs / "support.eval"))
    verdicts = [r for r in _lines(demo / "support" / "records.jsonl") if r.get("kind") == "verdict"]
    judged = [s for s in support.samples if "criterion" in s.scores]
    assert [s.scores["criterion"].explanation for s in judged] == [r["rationale"] for r in verdicts]
    assert [s.scores["criterion"].value for s in judged] == [float(r["met"]) for r in verdicts]
    # a response's conversation: the user turns as input, the last reply as output
    response = next(r for r in _lines(demo / "support" / "records.jsonl") if r.get("kind") == "response")
    sample = next(s for s in support.samples if s.metadata["record"] == response)
    assert sample.output.completion == response["turns"][-1]["content"]
    assert [m.text for m in sample.input] == [t["content"] for t in response["turns"][:-1]]


def test_results_carry_the_runs_metrics_with_intervals(demo_logs):
    demo, logs = demo_logs
    metrics = json.loads((demo / "risk" / "metrics.json").read_text())
    got = read_eval_log(str(logs / "risk.eval")).results.scores[0].metrics
    for method, entry in metrics["methods"].items():
        for name in ("macro_f1", "qwk", "mae"):
            value, (lo, hi) = entry[name]["value"], entry[name]["ci"]
            key = f"methods/{method}/{name}"
            assert (got[key].value, got[f"{key}_ci_low"].value, got[f"{key}_ci_high"].value) == (value, lo, hi)


def test_the_inspect_log_format_version_is_the_one_written():
    installed = EvalLog.model_fields["version"].default
    assert installed == INSPECT_LOG_VERSION, (
        f"the installed inspect-ai writes log format version {installed}, carebench's exporter and importer "
        f"were written for {INSPECT_LOG_VERSION}: check carebench.inspect.log against the new format")


def test_bad_input_is_one_line(tmp_path, demo_logs, capsys):
    demo, _ = demo_logs
    assert main(["export", "inspect", str(demo / "risk"), "--out", str(tmp_path / "x.txt")]) == 2
    assert main(["export", "inspect", str(tmp_path), "--out", str(tmp_path / "x.eval")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"carebench: error: --out {tmp_path / 'x.txt'}: an Inspect log file ends in .eval"
    assert err[1].startswith("carebench: error: ") and "manifest.json" in err[1] and len(err) == 2
    assert not list(tmp_path.glob("*.eval"))


def test_without_the_extra_one_line_says_what_to_install(tmp_path, demo_logs, capsys, monkeypatch):
    demo, _ = demo_logs
    for name in [m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # import inspect_ai now raises ImportError
    assert main(["export", "inspect", str(demo / "risk"), "--out", str(tmp_path / "r.eval")]) == 2
    assert capsys.readouterr().err.strip() == (
        "carebench: error: this needs UK AISI's Inspect: pip install 'carebench[inspect]'")


def test_a_construct_run_exports_a_sample_per_record(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))
    from suite_runs import construct_run

    run = construct_run(tmp_path)
    assert main(["export", "inspect", str(run), "--out", str(tmp_path / "construct.eval")]) == 0
    log = read_eval_log(str(tmp_path / "construct.eval"))
    records = _lines(run / "records.jsonl")
    assert len(log.samples) == len(records) > 0
    assert [s.metadata["record"] for s in log.samples] == records
    assert log.eval.task.startswith("carebench/construct")

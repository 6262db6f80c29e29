"""The run skeleton: ``carebench report DIR`` reproduces a run's metrics.json and report
byte for byte from the records alone, for every suite and for the few-shot sweep, and a
sweep writes calls.jsonl that ``replay:`` answers from."""

from __future__ import annotations

import json

from carebench.cli import main
from carebench.support.tasks import load_tasks
from risk.test_every_method import answer
from stub_server import StubServer
from support.scripted_stub import Script

OUTPUTS = ("metrics.json", "report.md", "report.html")


def _reproduced(run_dir) -> None:
    before = {n: (run_dir / n).read_bytes() for n in OUTPUTS}
    for n in OUTPUTS:
        (run_dir / n).unlink()
    assert main(["report", str(run_dir)]) == 0
    for n in OUTPUTS:
        assert (run_dir / n).read_bytes() == before[n], n


def test_report_reproduces_risk_support_and_sweep_runs(tmp_path):
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = answer
        u = stub.base_url
        risk = tmp_path / "risk"
        assert main(["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{u}",
                     "--method", "tfidf-lr", "--method", "llm", "--bootstrap", "50",
                     "--out", str(risk)]) == 0
        sweep = tmp_path / "sweep"
        args = ["risk", "sweep", "--data", "builtin:sample", "--k", "2", "--k", "4",
                "--pool-per-level", "2", "--bootstrap", "50"]
        assert main([*args, "--model", f"openai:stub@{u}", "--out", str(sweep)]) == 0
        made = stub.count()
        # the sweep's calls.jsonl answers a replay of it: no new call, same numbers
        replayed = tmp_path / "replayed"
        assert main([*args, "--model", f"replay:{sweep}", "--out", str(replayed), "--no-cache"]) == 0
        assert stub.count() == made
        stub.handler = Script(tasks)
        support = tmp_path / "support"
        assert main(["support", "run", "--responder", f"openai:resp-a@{u}",
                     *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                     "--attempts", "1", "--limit", "3", "--bootstrap", "50", "--out", str(support)]) == 0
    calls = [json.loads(x) for x in (sweep / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 3 * (48 - 4 * 2)  # 3 arms x the items outside the 8-post pool
    assert {c["model"] for c in calls} == {f"openai:stub@{u}"}
    m_sweep, m_replay = (json.loads((d / "metrics.json").read_text()) for d in (sweep, replayed))
    assert m_sweep["methods"] == m_replay["methods"]
    assert "Few-shot scaling (Appendix G)" in (sweep / "report.md").read_text()
    assert json.loads((sweep / "manifest.json").read_text())["sweep"]["ks"] == [0, 2, 4]
    for run_dir in (risk, sweep, support):
        _reproduced(run_dir)
    assert (sweep / "figures" / "fig4_fewshot_sweep.png").is_file()

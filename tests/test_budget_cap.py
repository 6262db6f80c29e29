"""The budget is one cap for the whole command (issue 9's done-when): each suite against
the stub at $1 a call, ``--budget 5``, concurrency 4, makes at most 5 + 4 calls, exits
3 with one line, marks the cut-short work incomplete (never scored as failures), and a
re-run without the budget finishes with no call repeated."""

from __future__ import annotations

import json
from collections import Counter

from carebench.cli import main
from carebench.support.tasks import load_tasks
from risk.test_every_method import answer
from stub_server import StubServer
from support.scripted_stub import Script


def _carebench_lines(capsys) -> list[str]:
    """The CLI's own messages (progress bars also write to stderr)."""
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]


def _bodies(stub) -> list[bytes]:
    return [r.raw for r in stub.requests]


def test_risk_adjudicated_budget_stop_then_resume(tmp_path, capsys, price_per_call):
    price_per_call(1.0, "stub")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = answer
        args = ["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                "--method", "tfidf-lr", "--method", "adjudicated:voters=variants", "--bootstrap", "50",
                "--concurrency", "4", "--out", str(out), "--cache", str(tmp_path / "c.sqlite")]
        assert main([*args, "--budget", "5"]) == 3
        err = _carebench_lines(capsys)
        assert len(err) == 1 and "spent $5.00 on 5 calls; 235 calls left" in err[0], err
        assert "resume" in err[0]  # 187 component calls not made + 48 adjudicator calls
        first = _bodies(stub)
        assert 1 <= len(first) <= 9
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["incomplete"] == ["adjudicated"]
        adj = metrics["methods"]["adjudicated"]
        assert adj["status"] == "incomplete" and adj["macro_f1"]["value"] is None
        assert "failures" not in adj  # a budget stop is not the method's failure
        assert metrics["methods"]["tfidf-lr"]["status"] == "complete"
        assert metrics["methods"]["tfidf-lr"]["macro_f1"]["value"] is not None
        records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        assert not any(r["status"] == "budget" for r in records)
        assert "Incomplete" in (out / "report.md").read_text()

        assert main(args) == 0  # resume: same command, no budget
        again = _bodies(stub)
    counts = Counter(again)
    assert max(counts.values()) == 1  # no call was made twice
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["incomplete"] == [] and metrics["methods"]["adjudicated"]["status"] == "complete"
    assert len(metrics["methods"]["adjudicated"]) > 5


def test_support_three_judges_budget_stop_then_resume(tmp_path, capsys, price_per_call):
    price_per_call(1.0, "resp-a", "judge-a", "judge-b", "judge-c")  # exact names (issue 10)
    tasks = load_tasks("builtin:sample")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        args = ["support", "run", "--responder", f"openai:resp-a@{u}",
                *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                "--attempts", "1", "--limit", "2", "--out", str(out), "--bootstrap", "50",
                "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "4"]
        assert main([*args, "--budget", "5"]) == 3
        err = _carebench_lines(capsys)
        assert len(err) == 1 and "budget of $5.00 reached" in err[0], err
        first = _bodies(stub)
        assert 1 <= len(first) <= 9
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "incomplete" and manifest["incomplete"] == ["judging"]
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["status"] == "incomplete" and "overall" not in json.dumps(metrics)
        # one single-turn and one three-turn task: 4 responder calls, then judging stops
        judged = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()
                  if json.loads(x)["kind"] == "verdict"]
        assert metrics["finished"] == {"responses": 2, "verdicts": len(judged)}
        assert len(judged) == len(first) - 4  # only answered verdicts are records

        assert main(args) == 0
        again = _bodies(stub)
    assert max(Counter(again).values()) == 1
    n_crit = sum(len(t.criteria) for t in tasks[:2])
    assert len(again) == 4 + 3 * n_crit  # every call made exactly once over both runs
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_no_cache_stop_says_a_rerun_pays_again(tmp_path, capsys, price_per_call):
    price_per_call(1.0, "stub")
    with StubServer() as stub:
        stub.handler = answer
        rc = main(["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                   "--method", "llm", "--no-cache", "--budget", "2", "--bootstrap", "20",
                   "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 3 and "--no-cache" in err and "resume from the cache" not in err


def test_a_support_stop_in_generation_counts_the_calls_left_as_a_lower_bound(tmp_path, capsys, price_per_call):
    """The judging calls depend on replies not generated yet: the stop line says "at least"."""
    price_per_call(1.0, "resp-a", "judge-a")
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        assert main(["support", "run", "--responder", f"openai:resp-a@{u}", "--judge", f"openai:judge-a@{u}",
                     "--attempts", "1", "--limit", "2", "--out", str(tmp_path / "run"), "--bootstrap", "20",
                     "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "1", "--budget", "2"]) == 3
        assert not any(r.body["model"] == "judge-a" for r in stub.requests)  # stopped in generation
    err = _carebench_lines(capsys)
    assert len(err) == 1 and "at least " in err[0] and "calls left" in err[0], err


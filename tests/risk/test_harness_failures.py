"""A call that failed after every retry is a harness failure, never the model's wrong answer.

Verification stopped a server mid-run: risk recorded the lost calls as failed predictions,
scored them at the level farthest from gold and exited 0. Here the loopback stub goes down
mid-run and comes back; the method must be ``incomplete`` and unscored, the CLI must print
one line and exit 1, and a re-run of the same command must retry exactly the failed calls.
Only the model's own answers (unparseable, refused, truncated) follow ``--failures``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import sklearn.metrics as skm
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from outage import Outage, fast_retries
from stub_server import StubReply, StubServer

N_ITEMS = 48  # builtin:sample


def _risk(url: str, out: Path, cache: Path, *extra: str):
    args = ["run", "--data", "builtin:sample", "--method", "llm-conservative",
            "--model", f"openai:stub-model@{url}", "--concurrency", "1",
            "--out", str(out), "--cache", str(cache), "--bootstrap", "50", *extra]
    return CliRunner().invoke(app, args, catch_exceptions=True)


def _gave_up(run_dir: Path) -> list[dict]:
    return [c for c in read_jsonl(run_dir / "calls.jsonl")
            if str(c["completion"].get("error") or "").startswith("gave up after")]


def test_server_stopped_and_restarted_mid_run_is_incomplete_not_wrong(tmp_path, monkeypatch):
    fast_retries(monkeypatch)
    cache = tmp_path / "c.db"
    # answers take 20 ms, so the run is still going when the server goes down
    with Outage(lambda req: StubReply(content="b", delay=0.02), after=8, down_s=1.0) as server:
        res = _risk(server.base_url, tmp_path / "run1", cache)
        url = server.base_url
    assert res.exit_code == 1, res.output + repr(res.exception)
    err = [ln for ln in res.stderr.splitlines() if ln.startswith("carebench:")]
    assert len(err) == 1 and err[0].startswith("carebench: run incomplete"), res.stderr
    run1 = tmp_path / "run1"
    failed = _gave_up(run1)
    assert 0 < len(failed) < N_ITEMS  # the outage hit some calls, not all
    manifest = json.loads((run1 / "manifest.json").read_text())
    assert manifest["status"] == "incomplete"
    assert manifest["failed_calls"] == len(failed)
    assert manifest["harness_failures"] == {"llm-conservative": len(failed)}
    metrics = json.loads((run1 / "metrics.json").read_text())
    m = metrics["methods"]["llm-conservative"]
    assert m["status"] == "incomplete" and m["macro_f1"]["value"] is None
    records = read_jsonl(run1 / "records.jsonl")
    assert sum(r["status"] == "harness_failure" for r in records) == len(failed)
    assert "calls failed after every retry" in (run1 / "report.md").read_text()

    # the same command with the server up: exactly the failed calls are made again
    with StubServer(lambda req: "b", port=int(url.rsplit(":", 1)[1].split("/")[0])) as stub:
        res2 = _risk(stub.base_url, tmp_path / "run2", cache)
        again = [r for r in stub.requests if r.path.endswith("/chat/completions")]
    assert res2.exit_code == 0, res2.output + repr(res2.exception)
    assert len(again) == len(failed)
    manifest2 = json.loads((tmp_path / "run2" / "manifest.json").read_text())
    assert manifest2["status"] == "complete" and manifest2["failed_calls"] == 0
    rec2 = read_jsonl(tmp_path / "run2" / "records.jsonl")
    y = np.array([r["gold"] for r in rec2])
    p = np.array([r["pred"] for r in rec2])
    assert (p == 1).all()  # every answer "b" = Ideation
    got = json.loads((tmp_path / "run2" / "metrics.json").read_text())["methods"]["llm-conservative"]
    assert got["macro_f1"]["value"] == skm.f1_score(y, p, average="macro", zero_division=0)


def test_http_500_forever_for_one_item_is_a_harness_failure(tmp_path, monkeypatch):
    fast_retries(monkeypatch)
    with StubServer(lambda req: "b") as stub:
        stub.on_text("Tonight is the night", StubReply(status=500))
        res = _risk(stub.base_url, tmp_path / "run", tmp_path / "c.db")
    assert res.exit_code == 1, res.output
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "incomplete" and manifest["failed_calls"] == 1
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())["methods"]["llm-conservative"]
    assert m["status"] == "incomplete"


def test_the_models_own_unusable_answers_follow_the_failure_policy(tmp_path, monkeypatch):
    """An unparseable answer and a refusal (content filter) are the model's: scored wrong."""
    fast_retries(monkeypatch)
    with StubServer(lambda req: "b") as stub:
        stub.on_text("Tonight is the night", "I would rather not say.")
        stub.on_text("Reminder that therapy", StubReply(content="", finish_reason="content_filter"))
        res = _risk(stub.base_url, tmp_path / "run", tmp_path / "c.db")
    assert res.exit_code == 0, res.output + repr(res.exception)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["failed_calls"] == 0
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())["methods"]["llm-conservative"]
    assert m["status"] == "complete" and m["failures"] == 2
    assert m["failures_by_status"] == {"content_filter": 1, "parse_error": 1}


def test_latency_is_service_time_and_queue_wait_is_recorded_apart(tmp_path):
    """48 calls through one slot to a server answering in 0.1 s: each call's service time is
    ~0.1 s while the later ones wait seconds for the slot. Table 3's latency is the service
    time; the wait is recorded per call (calls.jsonl) and per item, and shown apart."""
    with StubServer(lambda req: StubReply(content="b", delay=0.1)) as stub:
        res = _risk(stub.base_url, tmp_path / "run", tmp_path / "c.db")
    assert res.exit_code == 0, res.output + repr(res.exception)
    calls = read_jsonl(tmp_path / "run" / "calls.jsonl")
    service = np.array([c["completion"]["latency_s"] for c in calls])
    waits = np.sort([c["completion"]["queue_wait_s"] for c in calls])
    assert len(calls) == N_ITEMS
    assert 0.09 <= np.median(service) < 0.3
    # one slot: the k-th call waits for the k calls before it, about 0.1 s each
    assert waits[0] < 0.05 and waits[-1] > 0.09 * (N_ITEMS - 1)
    assert np.median(waits) > 1.0
    cost = json.loads((tmp_path / "run" / "metrics.json").read_text())["methods"]["llm-conservative"]["cost"]
    records = read_jsonl(tmp_path / "run" / "records.jsonl")
    assert cost["median_latency_s"] == float(np.median([r["latency_s"] for r in records]))
    assert cost["median_latency_s"] < 0.3
    assert cost["median_queue_wait_s"] == float(np.median([r["queue_wait_s"] for r in records])) > 1.0
    assert "Queue wait (median s)" in (tmp_path / "run" / "report.md").read_text()

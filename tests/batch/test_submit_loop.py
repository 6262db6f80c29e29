"""submit / status / fetch through the real openai and anthropic SDKs against a loopback fake
of their batch endpoints, ``batch run`` round by round, and resuming after a kill without
submitting anything twice."""

from __future__ import annotations

import json

import pytest

from batch.fake_batch_api import FakeBatchAPI
from batch.rounds import metrics
from batch.test_roundtrip_suites import risk_answer
from carebench.batch.manifest import Manifest
from carebench.cli import main


def _risk(spec: str) -> list[str]:
    return ["risk", "run", "--data", "builtin:sample", "--model", spec, "--method", "llm",
            "--method", "vote:voters=variants", "--bootstrap", "50"]


def _posts(api: FakeBatchAPI, suffix: str) -> int:
    return sum(1 for m, p in api.log if m == "POST" and p.endswith(suffix))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_run_round_trip_through_the_sdks(tmp_path, monkeypatch, capsys, provider):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    live_path = "/chat/completions" if provider == "openai" else "/v1/messages"
    with FakeBatchAPI(risk_answer, polls=2) as api:
        args = _risk(f"{provider}:stub@{api.base_url}")
        assert main([*args, "--out", str(tmp_path / "live"), "--cache", str(tmp_path / "live.sqlite")]) == 0
        n_live = _posts(api, live_path)
        assert n_live > 0
        rc = main(["batch", "run", "--dir", str(tmp_path / "bdir"), "--poll", "0.01", "--",
                   *args, "--out", str(tmp_path / "batch"), "--cache", str(tmp_path / "b.sqlite")])
        assert rc == 0, capsys.readouterr().err[-3000:]
        assert _posts(api, live_path) == n_live  # not one live call in any round
        created = _posts(api, "/batches")
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    m = Manifest.load(tmp_path / "bdir")
    assert created == len(m.rounds) == 1
    assert all(f["submission"]["fetched"] for _, f in m.files())
    err = capsys.readouterr().err
    assert "batches done" in err and "next check in" in err  # the progress line while waiting
    assert "sk-test" not in (tmp_path / "bdir" / "manifest.json").read_text()


def test_interrupted_submit_resumes_without_a_second_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    from batch.test_export_import import export

    with FakeBatchAPI(risk_answer, polls=0) as api:
        export(tmp_path, monkeypatch, api.base_url)
        bdir = tmp_path / "bdir"
        assert main(["batch", "submit", str(bdir)]) == 0
        m = Manifest.load(bdir)
        for _, f in m.files():  # the state a kill right after creating the batch leaves
            sub = f["submission"]
            sub["creating"] = 1e9 if f["format"] == "anthropic" else sub.get("created", 1.0)
            del sub["batch_id"]
        m.save()
        assert main(["batch", "submit", str(bdir)]) == 0
        assert main(["batch", "submit", str(bdir)]) == 0  # and again: nothing new
        assert _posts(api, "/v1/batches") == 1 and _posts(api, "/messages/batches") == 1
        assert _posts(api, "/v1/files") == 1  # the upload is not repeated either
        assert main(["batch", "fetch", str(bdir), "--cache", str(tmp_path / "c.sqlite")]) == 0
        assert main(["batch", "fetch", str(bdir), "--cache", str(tmp_path / "c.sqlite")]) == 0
    from carebench.engine.cache import CompletionCache

    assert len(CompletionCache(tmp_path / "c.sqlite")) == 7
    assert all(f["submission"]["fetched"] for _, f in Manifest.load(bdir).files())


def test_batch_run_killed_while_waiting_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    from carebench.batch import loop

    real_sleep = loop.time.sleep
    calls = {"n": 0}

    def sleep_then_die(s):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        real_sleep(s)

    monkeypatch.setattr(loop.time, "sleep", sleep_then_die)
    with FakeBatchAPI(risk_answer, polls=3) as api:
        cmd = ["batch", "run", "--dir", str(tmp_path / "bdir"), "--poll", "0.01", "--",
               *_risk(f"openai:stub@{api.base_url}"), "--out", str(tmp_path / "batch"),
               "--cache", str(tmp_path / "b.sqlite")]
        assert main(cmd) == 130  # killed while waiting for the first batch
        assert _posts(api, "/v1/batches") == 1
        assert main(cmd) == 0  # the same invocation resumes: waits, fetches, re-runs
        assert _posts(api, "/v1/batches") == 1 and _posts(api, "/v1/files") == 1
        assert _posts(api, "/chat/completions") == 0
    assert json.loads((tmp_path / "batch" / "metrics.json").read_text())["methods"]["llm"]["n_scored"] > 0

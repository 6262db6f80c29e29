"""A run killed with SIGKILL resumes from the cache without repeating completed calls,
and no API key reaches the cache or a run directory."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from stub_server import StubReply, StubServer

N_ITEMS = 120

WORKER = r"""
import sys
from pathlib import Path
from carebench.engine.cache import CompletionCache
from carebench.models import get_model
from carebench.engine.rundir import new_run_dir, write_jsonl, write_manifest
from carebench.engine.runner import Call, Runner, RunnerConfig, call_row
from carebench.types import ChatRequest, messages

base_url, cache_path, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
model = get_model(f"openai:stub-model@{base_url}")
calls = [Call(model, ChatRequest(messages(("user", f"item-{i}"))), tag=f"item-{i}") for i in range(n)]
runner = Runner(RunnerConfig(concurrency=4, progress=False), cache=CompletionCache(cache_path))
res = runner.run_sync(calls)
run_dir = new_run_dir("test", out)
write_manifest(run_dir, suite="test", config={"model": str(model.spec)}, models=[str(model.spec)],
               seeds={}, dataset={})
write_jsonl(run_dir / "records.jsonl",
            [{"item_id": c.tag, "text": comp.text} for c, comp in zip(calls, res.completions)])
write_jsonl(run_dir / "calls.jsonl", [call_row(c, comp) for c, comp in zip(calls, res.completions, strict=True)])
"""


def _run_worker(stub, cache: Path, out: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, stub.base_url, str(cache), str(out), str(N_ITEMS)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _cached_count(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _item_of(req) -> str:
    return req.body["messages"][-1]["content"]


def test_sigkill_midway_then_rerun_repeats_no_completed_call(tmp_path):
    cache, out = tmp_path / "cache.sqlite", tmp_path / "run"
    env = dict(os.environ)
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content=f"answer to {_item_of(r)}", delay=0.02)
        proc = _run_worker(stub, cache, out, env)
        deadline = time.time() + 60
        while _cached_count(cache) < N_ITEMS // 2 and time.time() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert not (out / "records.jsonl").exists()  # nothing half-written
        with sqlite3.connect(cache) as con:
            done_before = {
                json.loads(row[0])["text"].removeprefix("answer to ")
                for row in con.execute("SELECT completion FROM completions")
            }
        assert N_ITEMS // 2 <= len(done_before) < N_ITEMS
        seen_before = Counter(_item_of(r) for r in stub.requests)

        proc = _run_worker(stub, cache, out, env)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        seen_after = Counter(_item_of(r) for r in stub.requests) - seen_before

        # a third run of the same command makes zero provider calls
        n_requests = len(stub.requests)
        proc = _run_worker(stub, cache, tmp_path / "run3", env)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert len(stub.requests) == n_requests

    # no completed item was requested again; every item is recorded exactly once
    assert not (set(seen_after) & done_before)
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert Counter(r["item_id"] for r in records) == Counter(f"item-{i}" for i in range(N_ITEMS))
    assert all(r["text"] == f"answer to {r['item_id']}" for r in records)


def test_api_key_never_written(tmp_path):
    fake = "sk-FAKE-carebench-secret-0123456789abcdef"
    env = dict(os.environ, OPENAI_API_KEY=fake)
    cache, out = tmp_path / "cache.sqlite", tmp_path / "run"
    with StubServer() as stub:
        proc = subprocess.run(
            [sys.executable, "-c", WORKER, stub.base_url, str(cache), str(out), "5"],
            env=env, capture_output=True, timeout=120, check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        # the key was really in use ...
        assert stub.requests[0].headers["authorization"] == f"Bearer {fake}"
    # ... and appears in no file of the run directory, the cache, or the output
    files = [p for p in out.rglob("*") if p.is_file()] + list(tmp_path.glob("cache.sqlite*"))
    assert any(p.name == "calls.jsonl" for p in files)
    for p in files:
        assert fake.encode() not in p.read_bytes(), p
    assert fake.encode() not in proc.stdout + proc.stderr

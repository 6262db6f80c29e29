"""The runner commits the answers of one event-loop turn in one cache transaction.

At high concurrency many answers arrive in the same turn; they must all reach the
cache (a kill loses only calls not yet committed, which the next run makes again),
and a transaction that fails stores none of its rows, never part of them.
"""

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

import pytest

from carebench.engine.cache import CompletionCache
from carebench.types import Completion
from stub_server import StubReply, StubServer

N_ITEMS = 400
CONCURRENCY = 48

WORKER = r"""
import json, sys
from carebench.engine.run import Run
from carebench.engine.options import RunOptions
from carebench.engine.runner import Call
from carebench.types import ChatRequest, messages

base_url, cache_path, out, n, conc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
with Run(RunOptions(concurrency=conc, progress=False, cache_path=cache_path)) as run:
    model = run.model(f"openai:stub-model@{base_url}")
    calls = [Call(model, ChatRequest(messages(("user", f"item-{i}"))), tag=f"item-{i}") for i in range(n)]
    res = run.calls(calls, "items", stage="answer")
    with open(out, "w") as f:
        for c, comp in zip(calls, res.completions):
            f.write(json.dumps({"item": c.tag, "text": comp.text, "cached": comp.cached}) + "\n")
"""


def _worker(stub: StubServer, cache: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, stub.base_url, str(cache), str(out), str(N_ITEMS), str(CONCURRENCY)],
        env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _entries(cache: Path) -> list[dict]:
    if not cache.exists():
        return []
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as con:
            return [json.loads(row[0]) for row in con.execute("SELECT completion FROM completions")]
    except sqlite3.OperationalError:  # the file exists but the table is not made yet
        return []


def _item_of(req) -> str:
    return req.body["messages"][-1]["content"]


def test_kill_at_high_concurrency_loses_only_uncommitted_calls(tmp_path):
    cache = tmp_path / "cache.sqlite"
    items = {f"item-{i}" for i in range(N_ITEMS)}
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content=f"answer to {_item_of(r)}", delay=0.03)
        proc = _worker(stub, cache, tmp_path / "first.jsonl")
        deadline = time.time() + 90
        while len(_entries(cache)) < N_ITEMS // 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
        entries = _entries(cache)
        # every committed entry is whole: a parsable, complete answer to its own item
        done = {e["text"].removeprefix("answer to ") for e in entries}
        assert all(e["status"] == "ok" and e["text"].removeprefix("answer to ") in items for e in entries)
        assert len(done) == len(entries)
        assert N_ITEMS // 3 <= len(done) < N_ITEMS
        before = Counter(_item_of(r) for r in stub.requests)
        assert done <= set(before)

        proc = _worker(stub, cache, tmp_path / "second.jsonl")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        after = Counter(_item_of(r) for r in stub.requests) - before

        n_requests = len(stub.requests)
        proc = _worker(stub, cache, tmp_path / "third.jsonl")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert len(stub.requests) == n_requests  # every answer of the second run was committed

    # the resumed run asked exactly for the calls the cache did not hold, each once
    assert set(after) == items - done
    assert set(after.values()) == {1}
    rows = [json.loads(x) for x in (tmp_path / "second.jsonl").read_text().splitlines()]
    assert {r["item"] for r in rows} == items
    assert all(r["text"] == f"answer to {r['item']}" for r in rows)
    assert {r["item"] for r in rows if r["cached"]} == done
    assert len(_entries(cache)) == N_ITEMS


def test_failed_transaction_stores_none_of_its_rows(tmp_path):
    cache = CompletionCache(tmp_path / "c.sqlite")
    cache.put("kept", Completion(text="earlier", model="m"))
    bad = Completion(text="b", model="m")
    bad.model = None  # violates NOT NULL on the model column: the second row fails
    with pytest.raises(sqlite3.IntegrityError):
        cache.put_many([("a", Completion(text="a", model="m")), ("b", bad), ("c", Completion(text="c", model="m"))])
    assert len(cache) == 1
    assert cache.get("a") is None and cache.get("kept").text == "earlier"
    cache.put_many([("a", Completion(text="a", model="m")), ("c", Completion(text="c", model="m"))])
    assert {k: cache.get(k).text for k in ("a", "c", "kept")} == {"a": "a", "c": "c", "kept": "earlier"}
    cache.close()

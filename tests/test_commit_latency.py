"""An answer is committed to the cache within 100 ms of arriving, whatever runs on the loop.

Verification killed runs with SIGKILL and found the re-run paying again for calls
answered up to seconds before the kill: the runner committed each event-loop turn's
answers one turn after they arrived, so CPU work that ran on the loop in between
(parsing, scoring, loading something) held the commit back for as long as it ran. Here
the CPU step is made deterministic: the moment call ``a``'s answer arrives, call ``b``
(a stand-in model) burns CPU on the loop for seconds. The run is killed during the burn,
then re-run; counted from the stub's log, the re-run must not ask for ``a`` again, since
its answer reached the socket more than 100 ms before the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from stub_server import StubReply, StubServer

WORKER = r"""
import asyncio, sys, time
from carebench.engine.cache import CompletionCache
from carebench.models import get_model
from carebench.engine.runner import Call, Runner, RunnerConfig
from carebench.types import ChatRequest, Completion, messages

base_url, cache_path, burn_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
http = get_model(f"openai:stub-model@{base_url}")
answered = asyncio.Event()


class Fast:
    # the stub's model; says when its answer has arrived
    spec, default_concurrency = http.spec, 4

    async def complete(self, request):
        comp = await http.complete(request)
        answered.set()
        return comp

    async def aclose(self):
        await http.aclose()


class CpuStep:
    # CPU work on the event loop that starts as another call's answer arrives
    spec, default_concurrency = get_model(f"openai:cpu-step@{base_url}").spec, 4

    async def complete(self, request):
        if burn_s:  # (the re-run answers "a" from the cache and burns nothing)
            await answered.wait()
            print("burning", flush=True)
        t0, x = time.perf_counter(), 0
        while time.perf_counter() - t0 < burn_s:
            x += 1
        return Completion(text="done", model=str(self.spec))

    async def aclose(self):
        pass


runner = Runner(RunnerConfig(progress=False), cache=CompletionCache(cache_path))
res = runner.run_sync([Call(Fast(), ChatRequest(messages(("user", "a")))),
                       Call(CpuStep(), ChatRequest(messages(("user", "b"))))])
print("texts", [c.text for c in res.completions], flush=True)
"""


def _worker(stub: StubServer, cache, burn_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, stub.base_url, str(cache), str(burn_s)],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_an_answer_is_durable_while_the_loop_burns_cpu(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content=f"answer to {r.text}")
        proc = _worker(stub, cache, burn_s=30.0)
        line = proc.stdout.readline().decode()
        assert line.strip() == "burning", (line, proc.stderr.read().decode() if proc.poll() is not None else "")
        time.sleep(0.4)  # the CPU step runs on; the answer to "a" reached the socket before it began
        proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        first = stub.requests
        assert [r.text for r in first] == ["a"] and first[0].status == 200
        assert killed_at - first[0].sent > 0.1  # answered well before the kill

        proc = _worker(stub, cache, burn_s=0.0)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert "answer to a" in out.decode()
        again = stub.requests[len(first):]
    # the re-run answered "a" from the cache: the stub never saw it again
    assert [r.text for r in again] == []


def test_a_failed_background_commit_is_raised_at_flush_and_stores_nothing(tmp_path):
    import sqlite3

    import pytest

    from carebench.engine.cache import CacheWriter, CompletionCache
    from carebench.types import Completion

    cache = CompletionCache(tmp_path / "c.sqlite")
    writer = CacheWriter(cache)
    writer.put("ok", Completion(text="kept", model="m"))
    writer.flush()
    bad = Completion(text="b", model="m")
    bad.model = None  # violates NOT NULL on the model column
    writer.put("bad", bad)
    with pytest.raises(sqlite3.IntegrityError):
        writer.flush()
    assert cache.get("ok").text == "kept" and cache.get("bad") is None
    writer.put("later", Completion(text="after", model="m"))  # the writer goes on after a failure
    writer.flush()
    assert cache.get("later").text == "after"
    cache.close()

"""A converse run killed mid-conversation resumes without repeating a completed turn
(counted from the stub's request log)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from converse_stub import ConverseScript
from rubrics import NAV, write_tsv

from carebench.cli import main
from stub_server import StubServer

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_sigkill_mid_conversation_then_resume(tmp_path):
    personas = tmp_path / "p.tsv"
    personas.write_text("id\tname\trisk_level\npa\tAnna\tlow\npb\tBen\thigh\n")
    script = ConverseScript(delay=0.05)
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        args = ["converse", "run", "--rubric", str(write_tsv(tmp_path / "nav.tsv", NAV)),
                "--personas", str(personas), "--simulator", f"openai:sim-a@{u}", "--chatbot",
                f"openai:bot-a@{u}", "--judge", f"openai:judge-a@{u}", "--turns", "4",
                "--bootstrap", "50", "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "1",
                "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen([sys.executable, "-m", "carebench", *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        # kill once the chatbot's turn-3 replies are being asked: mid-conversation
        while not any(e["role"] == "bot" and e["k"] == 3 for e in script.log) and time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode())
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(0.2)  # let the stub finish the request in flight
        assert not (out / "manifest.json").exists()  # nothing half-written
        first = [r.raw for r in stub.requests]
        assert any(b'"bot-a"' in r for r in first) and not any(b'"judge-a"' in r for r in first)
        assert main(args) == 0
        second = [r.raw for r in stub.requests][len(first):]
    # only the request in flight at the kill may be asked again; every completed turn came from the cache
    repeated = set(first) & set(second)
    assert repeated <= {first[-1]}
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    convs = [r for r in records if r["kind"] == "conversation"]
    assert len(convs) == 2 and all(len(c["turns"]) == 8 for c in convs)
    # every generation request of the finished run was made exactly once across both runs
    gen = [r for r in first + second if b'"judge-a"' not in r]
    assert len(gen) - len(repeated) == 2 * 4 * 2

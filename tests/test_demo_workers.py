"""``carebench demo --jobs N``: the suite parts in worker processes give the run directory
a run in one process gives, print each part whole in the parts' order, and a part that
fails in a worker ends the demo with the one line and exit code it ends with today."""

from __future__ import annotations

import json
import multiprocessing
import re
import sqlite3
from pathlib import Path

import pytest

from carebench import demo
from carebench.cli import main
from carebench.cores import choose_jobs
from carebench.suites import SUITES
from stub_server import StubReply, StubServer

PARTS = ("risk", "support", "plural", "converse")
#: what a run directory holds that does not depend on the clock: records, metrics, reports
#: (calls.jsonl and the manifests carry timestamps and measured seconds)
COMPARED = ("records.jsonl", "metrics.json", "report.md", "report.html")


def _answer(req) -> StubReply:
    """A valid answer for every part's requests, chosen from the request alone."""
    body = req.body
    prompt = body["messages"][-1]["content"]
    rf = json.dumps(body.get("response_format") or {})
    if "ANSWER OPTIONS (choose exactly one):\n" in prompt:  # converse judge
        first = prompt.split("ANSWER OPTIONS (choose exactly one):\n", 1)[1].splitlines()[0][2:]
        return StubReply(content=json.dumps({"answer": first}))
    if '"met"' in rf:  # support judge
        return StubReply(content=json.dumps({"met": len(prompt) % 2 == 0, "rationale": "stub"}))
    if '"appropriate"' in rf:  # plural jury
        return StubReply(content=json.dumps({"appropriate": True, "categories": ["RESPONSE_2"],
                                             "rationale": "stub"}))
    if '"answer"' in rf:  # risk's letter (a choice)
        return StubReply(content=json.dumps({"answer": "abcd"[len(prompt) % 4]}))
    return StubReply(content=f"stub reply {len(prompt) % 7}")


def _no_embedding(monkeypatch):
    """Risk without the sentence-embedding method (torch): the same in every run here."""
    from carebench.risk import demo as risk_demo

    real = risk_demo.demo_methods
    monkeypatch.setattr(risk_demo, "demo_methods", lambda spec, quick=True: (
        [s for s in real(spec, quick)[0] if s.method != "embed-lr"], real(spec, quick)[1]))


class _TickClock:
    """A clock that advances one second a reading: risk's supervised methods time their
    own fitting (their latency in records and Table 3), which no two runs share; with
    this clock every difference they take is 1 s, in any process."""

    def __init__(self) -> None:
        self.t = 0.0

    def perf_counter(self) -> float:
        self.t += 1.0
        return self.t


def _fixed_fitting_clock(monkeypatch) -> None:
    from carebench.risk.methods import supervised

    monkeypatch.setattr(supervised, "time", _TickClock())


def _recording(root: Path) -> Path:
    """One JSONL file of every call a stub-backed demo made (probe and parts)."""
    rows = (root / "calls.jsonl").read_text()
    for part in PARTS:
        rows += (root / part / "calls.jsonl").read_text()
    path = root.parent / "recording.jsonl"
    path.write_text(rows)
    return path


def test_parts_in_two_workers_write_what_one_process_writes(tmp_path, monkeypatch, capfd):
    assert tuple(p for p, e in SUITES.items() if e.demo is not None) == PARTS
    _no_embedding(monkeypatch)
    _fixed_fitting_clock(monkeypatch)
    with StubServer() as stub:
        stub.handler = _answer
        first = demo.run_demo(out=tmp_path / "stub", model_spec=f"openai:m@{stub.base_url}",
                              cache_path=tmp_path / "stub.sqlite", jobs=1)
    # replay gives each request its recorded answer and recorded service time, so the two
    # runs below can be compared byte for byte (a live model's latencies differ each run)
    spec = f"replay:{_recording(first)}"
    out = tmp_path / "demo"  # both runs write here (reports name their data files' paths)
    capfd.readouterr()
    rc = main(["demo", "--model", spec, "--out", str(out), "--cache", str(tmp_path / "seq.sqlite"), "--jobs", "1"])
    seq_err = capfd.readouterr().err
    out.rename(tmp_path / "seq")
    rc2 = main(["demo", "--model", spec, "--out", str(out), "--cache", str(tmp_path / "par.sqlite"), "--jobs", "2"])
    par_err = capfd.readouterr().err
    out.rename(tmp_path / "par")
    assert rc == rc2 == 0, par_err
    assert "parts: one after another (--jobs 1)" in seq_err
    assert "parts: 2 worker processes (--jobs 2)" in par_err
    seq, par = tmp_path / "seq", tmp_path / "par"
    compared = 0
    for part in PARTS:
        for name in COMPARED:
            assert (seq / part / name).read_bytes() == (par / part / name).read_bytes(), f"{part}/{name}"
            compared += 1
        figs = sorted(p.name for p in (seq / part).rglob("*.png"))
        assert figs == sorted(p.name for p in (par / part).rglob("*.png"))
        for name in figs:
            assert next((seq / part).rglob(name)).read_bytes() == next((par / part).rglob(name)).read_bytes()
        # the parts' answers are the recording's, not invented by the replay
        recs = (par / part / "calls.jsonl").read_text().splitlines()
        assert recs and all(json.loads(r)["completion"].get("error") is None for r in recs)
    assert compared == len(PARTS) * len(COMPARED)
    for name in ("records.jsonl", "report.md"):
        assert (seq / name).read_bytes() == (par / name).read_bytes()
    sm, pm = json.loads((seq / "metrics.json").read_text()), json.loads((par / "metrics.json").read_text())
    assert sm["parts"] == pm["parts"] == list(PARTS)
    assert sm["jobs"]["workers"] == 1 and pm["jobs"]["workers"] == 2
    assert "parts in 2 workers" in pm["phases"] and set(PARTS) <= set(pm["phases"])

    # console: every part's block whole and in the parts' order, its phase line last; the
    # lines a part printed itself (between its header and its phase line) are the same
    def blocks(err: str) -> list[list[str]]:
        out, cur = [], None
        for line in err.splitlines():
            if line.startswith("== ") and line.endswith(" suite =="):
                cur = [line]
                out.append(cur)
            elif cur is not None:
                cur.append(line)
                if line.startswith(cur[0][3:-9] + ": ") and " s wall" in line:
                    cur = None
        return out

    def shape(lines: list[str]) -> list[str]:  # measured figures (rates, seconds) differ per run
        return [re.sub(r"\d+(\.\d+)?", "#", x) for x in lines if x.strip()]

    sb, pb = blocks(seq_err), blocks(par_err)
    assert [b[0] for b in pb] == [f"== {p} suite ==" for p in PARTS] == [b[0] for b in sb]
    for s_block, p_block in zip(sb, pb, strict=True):
        assert p_block[-1].startswith(p_block[0][3:-9] + ": ")
        assert shape(s_block[1:-1]) == shape(p_block[1:-1]) and len(p_block) > 2


def test_a_failing_part_in_a_worker_is_one_line_and_the_same_exit_code(tmp_path, monkeypatch, capfd):
    _no_embedding(monkeypatch)
    from carebench.types import CarebenchError

    def broken(out_dir, model_spec, quick):
        print("support part started", flush=True)
        raise CarebenchError("support demo: the tasks file is unreadable (a test's failure)")

    entry = SUITES["support"]
    monkeypatch.setitem(SUITES, "support", type(entry)(entry.help, entry.app, entry.kinds, lambda: broken,
                                                      entry.comparer))
    errs = {}
    with StubServer() as stub:
        stub.handler = _answer
        for jobs in ("1", "2"):
            capfd.readouterr()
            rc = main(["demo", "--model", f"openai:m@{stub.base_url}", "--out", str(tmp_path / jobs),
                       "--cache", str(tmp_path / f"{jobs}.sqlite"), "--jobs", jobs])
            errs[jobs] = (rc, capfd.readouterr())
    for jobs, (rc, cap) in errs.items():
        assert rc == 2, jobs
        lines = cap.err.splitlines()
        assert lines[-1] == "carebench: error: support demo: the tasks file is unreadable (a test's failure)"
        assert "Traceback" not in cap.err
        # risk ran and printed before support, then support's own output; nothing after it
        assert cap.err.index("== risk suite ==") < cap.err.index("== support suite ==")
        assert "== plural suite ==" not in cap.err and "== converse suite ==" not in cap.err
        assert "support part started" in cap.out
        assert (tmp_path / jobs / "risk" / "metrics.json").is_file()
        assert not (tmp_path / jobs / "metrics.json").exists()  # the index is not written


def test_a_worker_that_dies_is_a_one_line_failure(tmp_path, monkeypatch, capfd):
    import os

    def dies(out_dir, model_spec, quick):
        os._exit(9)

    def fine(out_dir, model_spec, quick):
        print("the other part ran")

    entry = SUITES["risk"]
    monkeypatch.setattr("carebench.suites.SUITES", {
        name: type(entry)(entry.help, entry.app, entry.kinds, lambda f=f: f, entry.comparer)
        for name, f in (("risk", dies), ("other", fine))})
    with StubServer() as stub:
        stub.handler = _answer
        rc = main(["demo", "--model", f"openai:m@{stub.base_url}", "--out", str(tmp_path / "d"),
                   "--cache", str(tmp_path / "c.sqlite"), "--jobs", "2"])
    err = capfd.readouterr().err
    assert rc == 2
    assert err.splitlines()[-1] == ("carebench: error: demo part risk: its worker process ended (exit code 9) "
                                    "before the part finished")


def test_parts_go_longest_first_to_the_idle_worker():
    assert demo.longest_first(list(PARTS)) == ["converse", "plural", "support", "risk"]
    assert demo.longest_first(["risk", "new-part", "converse"]) == ["new-part", "converse", "risk"]


@pytest.mark.parametrize(("usable", "load", "requested", "n"), [
    (2, 0.6, None, 2),   # idle 2-core VM: 1.4 cores free
    (2, 1.01, None, 1),  # just under one core free: one after another
    (2, 1.0, None, 1),   # exactly one: one after another
    (2, 2.9, None, 1),   # busy
    (1, 0.0, None, 1),   # one usable core
    (8, 0.5, None, 2),   # many free cores: at most 2 automatically
    (2, None, None, 1),  # no load average: not assumed free
    (2, 2.9, 2, 2),      # --jobs forces it
    (2, 0.0, 9, 4),      # at most one worker per part
])
def test_jobs_rule(usable, load, requested, n):
    assert choose_jobs(4, requested, usable=usable, load=load).n == n


def _hammer(path: str, start: int, n: int) -> None:
    from carebench.engine.cache import CompletionCache
    from carebench.types import Completion

    cache = CompletionCache(path)
    for i in range(start, start + n, 5):
        cache.put_many([(f"k{j}", Completion(text=f"t{j}", model="m")) for j in range(i, i + 5)])
    cache.close()


def test_the_completion_cache_takes_writes_from_two_processes_at_once(tmp_path):
    path = tmp_path / "cache.sqlite"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(str(path), start, 400)) for start in (0, 400)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with sqlite3.connect(path) as conn:  # read back with sqlite3 itself, not the cache class
        rows = dict(conn.execute("SELECT key, completion FROM completions").fetchall())
    assert len(rows) == 800
    assert all(json.loads(rows[f"k{j}"])["text"] == f"t{j}" for j in range(800))

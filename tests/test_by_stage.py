"""Every suite's manifest has ``by_stage`` (``Run.accounting()``), and it agrees with the
call log: for one run of each suite that calls models, the per-stage calls, provider
calls, cache hits and errors are recomputed from ``calls.jsonl`` (each row's ``stage``
and ``cached``) and compared with the manifest. Every row must name its stage.

Recomputation: a row answered from the cache is a cache hit; any other row reached a
provider, except a row that shares the answer of an identical call in flight (the
runner makes such calls once): its completion record is the very same answer, so an
uncached row equal in request *and* completion (latency included) to an earlier
uncached row of its stage is a shared answer, not a provider call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from construct_stub import Pipeline
from jury_stub import Scripted, write_release
from scripted_stub import Script

from carebench.cli import main
from carebench.support.tasks import load_tasks
from risk.test_every_method import answer
from stub_server import StubServer


def recomputed(run_dir: Path) -> tuple[dict[str, dict[str, int]], int]:
    """(per-stage calls, provider calls, cache hits and errors; shared answers) from calls.jsonl."""
    rows = [json.loads(x) for x in (run_dir / "calls.jsonl").read_text("utf-8").splitlines() if x.strip()]
    assert rows, f"{run_dir}: no calls logged"
    assert all(isinstance(r.get("stage"), str) and r["stage"].strip() for r in rows), "a row without a stage"
    out: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    shared = 0
    for r in rows:
        s = out.setdefault(r["stage"], {"calls": 0, "provider_calls": 0, "cache_hits": 0, "errors": 0})
        s["calls"] += 1
        if r["cached"]:
            s["cache_hits"] += 1
            continue
        key = (r["stage"], json.dumps([r["model"], r["request"], r["completion"]], sort_keys=True))
        if key in seen:
            shared += 1
            continue
        seen.add(key)
        s["provider_calls"] += 1
        s["errors"] += r["completion"].get("error") is not None
    return out, shared


def check_by_stage(run_dir: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    acct = manifest["accounting"]
    by_stage = acct["by_stage"]
    counts, shared = recomputed(run_dir)
    assert {k: {f: int(v[f]) for f in ("calls", "provider_calls", "cache_hits", "errors")}
            for k, v in by_stage.items()} == counts
    # and the stages add up to the run's totals (no call outside a stage)
    assert sum(v["provider_calls"] for v in by_stage.values()) == acct["provider_calls"]
    assert sum(v["cache_hits"] for v in by_stage.values()) == acct["cache_hits"]
    assert acct["shared"] == shared and acct["calls_recorded"] == sum(v["calls"] for v in counts.values())
    return by_stage


def test_risk_llm_and_tfidf(tmp_path):
    with StubServer() as stub:
        stub.handler = answer
        args = ["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                "--method", "llm", "--method", "tfidf-lr", "--bootstrap", "20",
                "--cache", str(tmp_path / "c.sqlite")]
        assert main([*args, "--out", str(tmp_path / "a")]) == 0
        first = check_by_stage(tmp_path / "a")
        assert main([*args, "--out", str(tmp_path / "b")]) == 0  # the same run again: all from the cache
        second = check_by_stage(tmp_path / "b")
    assert set(first) == {"llm"}  # tfidf-lr calls no model
    assert first["llm"]["provider_calls"] == first["llm"]["calls"] > 0 and first["llm"]["cache_hits"] == 0
    assert second["llm"]["cache_hits"] == second["llm"]["calls"] == first["llm"]["calls"]
    assert second["llm"]["provider_calls"] == 0


def test_support_three_judges(tmp_path):
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        rc = main(["support", "run", "--responder", f"openai:resp-a@{u}", "--responder", f"openai:resp-b@{u}",
                   *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                   "--attempts", "1", "--limit", "3", "--out", str(tmp_path / "run"), "--bootstrap", "20",
                   "--cache", str(tmp_path / "c.sqlite")])
        assert rc == 0
        made = len(stub.requests)
    by_stage = check_by_stage(tmp_path / "run")
    assert set(by_stage) == {"generation", "judging"}
    n_crit = sum(len(t.criteria) for t in tasks[:3])
    assert by_stage["judging"]["calls"] == 3 * 2 * n_crit  # three judges, two responders, every criterion
    assert sum(v["provider_calls"] for v in by_stage.values()) == made  # the stub saw every provider call


def test_plural_run(tmp_path):
    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = Scripted()
        u = stub.base_url
        rc = main(["plural", "run", "--release", str(release), "--system", f"openai:sys-a@{u}",
                   *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                   "--sample-size", "3", "--bootstrap", "20", "--out", str(tmp_path / "run"),
                   "--cache", str(tmp_path / "c.sqlite")])
        assert rc == 0
        made = len(stub.requests)
    by_stage = check_by_stage(tmp_path / "run")
    assert {"responses"} < set(by_stage)
    assert sum(v["provider_calls"] for v in by_stage.values()) == made


def test_construct_build(tmp_path):
    with StubServer() as stub:
        stub.handler = Pipeline()
        m = lambda name: f"openai:{name}@{stub.base_url}"
        (tmp_path / "literals.txt").write_text("forum_sg\n", "utf-8")
        cfg = tmp_path / "build.yaml"
        cfg.write_text(yaml.safe_dump({
            "router": m("router"), "judge": m("judge"), "rewriters": [m("good"), m("plain")],
            "literals": str(tmp_path / "literals.txt"), "embedder": "hashing"}), "utf-8")
        rc = main(["construct", "build", "--config", str(cfg), "--out", str(tmp_path / "run"),
                   "--cache", str(tmp_path / "c.sqlite")])
        assert rc == 0
        made = len(stub.requests)
    by_stage = check_by_stage(tmp_path / "run")
    assert len(by_stage) >= 3  # persona sketches, picks, rewrites, the judge, ...
    assert sum(v["provider_calls"] for v in by_stage.values()) == made

"""Every registered risk method runs end to end through the CLI against the stub, with
failures counted: one run directory holding every method's metrics and records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from carebench.risk.methods import REGISTRY
from stub_server import StubReply, StubServer

PROFILE = {
    "ideation_presence": 2, "plan_specificity": 1, "temporality": 1, "prior_attempts": 0,
    "hopelessness": 2, "protective_factors": 1, "third_party_context": 0, "linguistic_urgency": 1,
}


def answer(req) -> StubReply:
    """A plausible answer for each request shape; every 7th letter answer is unparseable."""
    body = req.body or {}
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    props = schema.get("properties") or {}
    if "ideation_presence" in props:
        return StubReply(content=json.dumps(PROFILE))
    system = (body.get("messages") or [{}])[0].get("content", "")
    if "FINAL:" in system:
        return StubReply(content="The post mentions a plan.\nFINAL: c")
    if req.index % 7 == 0:
        return StubReply(content="I am not able to choose.")
    letter = "abcd"[len(req.text) % 4]  # plain letters: the default protocol (§4.2)
    return StubReply(content=json.dumps({"answer": letter}) if "answer" in props else letter)


def test_every_registered_method_runs_and_counts_failures(tmp_path):
    methods = sorted(m for m in REGISTRY if m != "embed-lr")  # embed-lr needs torch: own test
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = answer
        args = [sys.executable, "-m", "carebench", "risk", "run", "--data", "builtin:sample",
                "--model", f"openai:stub@{stub.base_url}", "--bootstrap", "200", "--out", str(out)]
        for m in methods:
            arg = {"llm-few-shot": "llm-few-shot:pool_per_level=2,k=4"}.get(m, m)
            if m in ("vote", "adjudicated", "stacked"):  # one model: the variant panel, by name
                arg = f"{m}:voters=variants"
            args += ["--method", arg]
        p = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False,
                           env=dict(os.environ, CAREBENCH_CACHE=str(tmp_path / "c.sqlite")))
        assert p.returncode == 0, p.stderr[-2000:]
        n_requests = len(stub.requests)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(methods) <= set(metrics["methods"])
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    by_method: dict[str, list] = {}
    for r in records:
        by_method.setdefault(r["method"], []).append(r)
    for m in methods:
        rows = by_method[m]
        assert len(rows) == metrics["n"] == 48, m  # every item recorded once per method
        failed = sum(r["pred"] is None and r["status"] not in ("excluded",) for r in rows)
        assert metrics["methods"][m]["failures"] == failed, m
    # unparseable letter answers are failures of the letter methods, not dropped
    assert metrics["methods"]["llm"]["failures"] > 0
    assert all(r["status"] in ("ok", "parse_error", "excluded") for r in by_method["llm"])
    # few-shot never scores its exemplar pool (2 per level)
    assert sum(r["status"] == "excluded" for r in by_method["llm-few-shot"]) == 8
    assert n_requests > 0

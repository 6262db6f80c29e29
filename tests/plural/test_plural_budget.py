"""One budget for the whole plural command (one run context): against the stub priced at
$1 a call with ``--budget 5`` and concurrency 4, a command makes at most 5 + 4 calls,
exits 3 with the run's one stop line, marks the cut-short work incomplete (never scored
as failures), and re-running without the budget finishes it with no request repeated.
Call counts are worked out from the inputs (prompts, systems, archetypes, profiles,
judges, calibration cases), never read back from the code under test.
"""

from __future__ import annotations

import json
from collections import Counter

from jury_stub import ARCH, POLICY, Scripted, write_release
from labelling_stub import Labeller

from carebench.cli import main
from carebench.datasets.prompts import load_annotations, load_prompts
from carebench.plural.data import builtin_path
from stub_server import StubServer

SYSTEMS = ("sys-c", "sys-d")  # not the scripted broken / empty systems of jury_stub
JUDGES = ("judge-a", "judge-b", "judge-c")


def _stop_lines(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]


def _bodies(stub) -> list[bytes]:
    return [r.raw for r in stub.requests]


def _read(path):
    return json.loads(path.read_text())


def _distinct_run_calls() -> int:
    """systems x archetypes x prompts responses, then each response judged against each
    of its archetype's profiles (their policies differ on every prompt) by every judge."""
    prompts = sorted({p for _, p in POLICY})
    archetypes = sorted(set(ARCH.values()))
    responses = len(SYSTEMS) * len(archetypes) * len(prompts)
    verdicts = len(SYSTEMS) * len(prompts) * len(ARCH) * len(JUDGES)  # P1, P2 (peer) + C1 (clinician)
    return responses + verdicts


def test_plural_run_budget_stops_marks_incomplete_and_resumes(tmp_path, capsys, price_per_call):
    price_per_call(1.0, *SYSTEMS, *JUDGES)
    release = write_release(tmp_path / "release")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Scripted()
        u = stub.base_url
        args = ["plural", "run", "--release", str(release), *(x for s in SYSTEMS for x in ("--system", f"openai:{s}@{u}")),
                *(x for j in JUDGES for x in ("--judge", f"openai:{j}@{u}")), "--sample-size", "3",
                "--out", str(out), "--bootstrap", "50", "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "4"]
        # 0. the dry run prices the whole run: every distinct call at $1
        assert main([*args, "--dry-run", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert plan["calls"] == plan["to_make"] == _distinct_run_calls()
        assert plan["estimated_cost_usd"] == _distinct_run_calls() * 1.0
        assert [s["name"] for s in plan["stages"]] == ["responses", "jury"]
        assert {m["reply_lengths"] for m in plan["by_model"].values()} == {"output caps"}
        assert stub.requests == [] and not out.exists()
        # 1. the budget stops the responses: nothing is judged or scored
        assert main([*args, "--budget", "5"]) == 3
        err = _stop_lines(capsys)
        responses_total = len(SYSTEMS) * 2 * 3
        # left: the 7 responses not made, and at least the verdicts of the 5 that were (the jury
        # has not started; the other verdicts depend on replies not yet made). A peer response
        # meets P1 and P2, a clinician one C1, each judged by all three judges.
        rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        seats = sum(3 * (2 if r["archetype"] == "peer" else 1) for r in rows)
        left = responses_total - 5 + seats
        assert len(err) == 1 and f"spent $5.00 on 5 calls; at least {left} calls left" in err[0], err
        assert "resume" in err[0]
        assert 1 <= len(_bodies(stub)) <= 5 + 4
        manifest = _read(out / "manifest.json")
        assert manifest["status"] == "incomplete" and manifest["incomplete"] == ["jury", "responses"]
        assert manifest["accounting"]["provider_calls"] == len(_bodies(stub))
        metrics = _read(out / "metrics.json")
        assert metrics["status"] == "incomplete" and "cells" not in metrics
        rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        assert metrics["finished"] == {"responses": len(rows), "verdicts": 0}
        assert len(rows) == len(_bodies(stub)) and all(r["status"] == "ok" for r in rows)
        assert "Incomplete" in (out / "report.md").read_text()

        # 2. a larger budget: responses finish (5 from the cache), the jury is cut short
        assert main([*args, "--budget", "15"]) == 3
        assert len(_stop_lines(capsys)) == 1
        manifest = _read(out / "manifest.json")
        assert manifest["incomplete"] == ["jury"]
        assert manifest["accounting"]["by_stage"]["responses"]["cache_hits"] == 5
        rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        verdicts = [r for r in rows if r["kind"] == "judgment"]
        assert sum(r["kind"] == "response" for r in rows) == responses_total
        assert len(verdicts) == 15 - (responses_total - 5)  # only answered verdicts are records
        assert _read(out / "metrics.json")["finished"] == {"responses": responses_total, "verdicts": len(verdicts)}

        # 3. no budget: finishes from the cache, every distinct call made exactly once overall
        assert main(args) == 0
        bodies = _bodies(stub)
    assert max(Counter(bodies).values()) == 1
    assert len(bodies) == _distinct_run_calls() == 66
    manifest = _read(out / "manifest.json")
    assert manifest["status"] == "complete" and manifest["incomplete"] == []
    metrics = _read(out / "metrics.json")
    assert {c["full"]["value"] for c in metrics["cells"]} == {1.0}  # the scripted jury's default: full


def test_plural_calibrate_budget_stops_marks_incomplete_and_resumes(tmp_path, capsys, price_per_call):
    prompts = load_prompts(builtin_path("prompts.jsonl"))
    annotations = load_annotations(builtin_path("annotations.jsonl"))
    cases = {a.case_id for a in annotations}
    price_per_call(1.0, "labeller")
    labeller = Labeller(prompts, annotations)
    out = tmp_path / "cal"
    with StubServer() as stub:
        stub.handler = labeller
        args = ["plural", "calibrate", "--model", f"openai:labeller@{stub.base_url}", "--method", "E0",
                "--method", "E1", "--cache", str(tmp_path / "c.sqlite"), "--bootstrap", "50", "--out", str(out),
                "--concurrency", "4"]
        assert main([*args, "--budget", "5"]) == 3
        err = _stop_lines(capsys)
        # E1 asks the shared judge once per calibration case (its requests do not depend on the
        # practitioner, so the six practitioners' folds share them): 30 distinct calls
        assert len(err) == 1 and f"spent $5.00 on 5 calls; {len(cases) - 5} calls left" in err[0], err
        first = _bodies(stub)
        assert 1 <= len(first) <= 5 + 4
        manifest = _read(out / "manifest.json")
        assert manifest["status"] == "incomplete" and manifest["incomplete"] == ["E1"]
        metrics = _read(out / "metrics.json")
        assert metrics["status"] == "incomplete" and "selection" not in metrics
        rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        assert {r["method"] for r in rows} == {"E0"}  # E1's cut-short work is not written, not failed
        rated = sum(not a.skipped for a in annotations)
        assert metrics["finished"] == {"E0 predictions": rated}
        assert main(args) == 0
        bodies = _bodies(stub)
    assert max(Counter(bodies).values()) == 1 and len(bodies) == len(cases) == 30
    metrics = _read(out / "metrics.json")
    assert set(metrics["selection"]) == {"peer", "clinician"}


def test_report_reproduces_a_plural_run_byte_for_byte(tmp_path):
    release = write_release(tmp_path / "release")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Scripted()
        u = stub.base_url
        assert main(["plural", "run", "--release", str(release), "--system", f"openai:sys-a@{u}",
                     "--system", f"openai:sys-b@{u}", *(x for j in JUDGES for x in ("--judge", f"openai:{j}@{u}")),
                     "--sample-size", "3", "--out", str(out), "--bootstrap", "100", "--no-cache"]) == 0
        n = len(stub.requests)
        files = ("metrics.json", "report.md", "report.html")
        before = {f: (out / f).read_bytes() for f in files}
        for f in files:
            (out / f).unlink()
        assert main(["report", str(out)]) == 0
        assert len(stub.requests) == n  # no model call
    for f in files:
        assert (out / f).read_bytes() == before[f], f
    metrics = json.loads(before["metrics.json"])
    assert metrics["counts"]["response_harness_failures"]["openai:sys-a@" + u] == 1  # scored without it

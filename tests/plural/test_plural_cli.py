"""`carebench plural sample | run | rescore` through the CLI: dry runs, the budget cap, user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jury_stub import Scripted, write_release

from carebench.cli import main
from stub_server import StubServer


def _run_args(release, u, out, *extra):
    return ["plural", "run", "--release", str(release), "--system", f"openai:sys-a@{u}",
            "--judge", f"openai:judge-a@{u}", "--judge", f"openai:judge-b@{u}", "--sample-size", "3",
            "--out", str(out), "--bootstrap", "50", *extra]


def test_dry_runs_make_no_call_and_write_nothing(tmp_path, capsys):
    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = Scripted()
        out = tmp_path / "run"
        assert main([*_run_args(release, stub.base_url, out), "--dry-run", "--json", "--no-cache",
                     "--reasoning-effort", "medium"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert not any("reasoning" in n for n in plan["notes"])  # an OpenAI-compatible system takes it
        responses, jury = plan["stages"]
        assert responses["calls"] == 1 * 2 * 3 and responses["exact"]  # system x archetypes x prompts
        # peer responses meet P1 and P2, clinician ones C1: (2 + 1) x 3 prompts x 2 judges
        assert jury["calls"] == (2 + 1) * 3 * 2 and not jury["exact"]  # replies not yet made: estimated
        assert plan["calls"] == plan["to_make"] == 6 + 18
        assert stub.requests == [] and not out.exists()
    assert main(["plural", "sample", "--release", str(release), "--size", "2", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sample_size"] == 2


def test_user_errors_are_one_line(tmp_path, capsys):
    release = write_release(tmp_path / "release")
    cases = [
        (["plural", "run", "--release", str(tmp_path / "nope"), "--system", "openai:x", "--judge", "openai:y"],
         "release directory"),
        (["plural", "run", "--release", str(release), "--system", "openai:x", "--judge", "openai:y",
          "--instruction", "peer"], "ARCHETYPE=FILE"),
        (["plural", "run", "--release", str(release), "--judge", "openai:y"], "--system"),
        (["plural", "run", "--release", str(release), "--system", "openai:x", "--judge", "openai:y",
          "--empty-policy", "drop"], "empty-policy"),
        (["plural", "run", "--release", str(release), "--system", "openai:x", "--judge", "openai:y",
          "--sample", str(tmp_path / "missing")], "sample"),
        (["plural", "rescore", str(release)], "manifest.json"),
    ]
    for args, needle in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("carebench: error:") and needle in err[0], err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "prompts.jsonl").write_text((release / "prompts.jsonl").read_text())
    (bad / "policies.jsonl").write_text('{"prompt_id": "q1", "profile": "P1", "archetype": "nurse"}\n')
    assert main(["plural", "sample", "--release", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "policies.jsonl: line 1" in err and "archetype" in err


def test_damaged_records_are_named_by_line(tmp_path, capsys):
    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = Scripted()
        out = tmp_path / "run"
        assert main(_run_args(release, stub.base_url, out, "--no-cache")) == 0
    capsys.readouterr()
    lines = (out / "records.jsonl").read_text().splitlines()
    lines[4] = lines[4][:-7]  # cut a line short
    (out / "records.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["plural", "rescore", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("carebench: error:") and "records.jsonl:5: invalid JSON" in err


def test_reasoning_effort_reaches_the_systems_and_not_the_jury(tmp_path):
    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = Scripted()
        out = tmp_path / "run"
        assert main([*_run_args(release, stub.base_url, out), "--no-cache", "--reasoning-effort", "medium"]) == 0
        bodies = [r.body for r in stub.requests]
    system = [b for b in bodies if b.get("model") == "sys-a"]
    jury = [b for b in bodies if b.get("model") in ("judge-a", "judge-b")]
    assert system and jury
    assert all(b.get("reasoning_effort") == "medium" for b in system)
    assert not any("reasoning_effort" in b for b in jury)
    assert json.loads((out / "manifest.json").read_text())["warnings"] == []


def test_calls_failed_after_retries_end_the_run_incomplete_with_one_line(tmp_path, capsys, monkeypatch):
    """Two system calls answered HTTP 500 on every try: exit 1 and one line, as support does;
    the manifest counts them and they are neither judged nor scored."""
    from outage import fast_retries
    from stub_server import StubReply

    fast_retries(monkeypatch)
    release = write_release(tmp_path / "release")
    script = Scripted()

    def handler(req):
        body = req.body
        if body["model"] == "sys-a" and "Q1:" in body["messages"][-1]["content"]:
            return StubReply(status=500)  # both archetypes of one prompt
        return script(req)

    with StubServer() as stub:
        stub.handler = handler
        out = tmp_path / "run"
        capsys.readouterr()
        code = main(_run_args(release, stub.base_url, out, "--no-cache"))
        five_hundreds = sum(1 for r in stub.requests if r.body.get("model") == "sys-a"
                            and "Q1:" in r.body["messages"][-1]["content"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("carebench:")]
    assert code == 1
    assert len(err) == 1 and "run incomplete: 2 calls failed after every retry" in err[0], err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "incomplete" and manifest["failed_calls"] == 2
    assert five_hundreds == 2 * 7  # two calls, seven tries each
    assert "output_modes" in manifest
    from carebench.engine.rundir import read_jsonl

    judged = {(r["system"], r["prompt_id"]) for r in read_jsonl(out / "records.jsonl") if r.get("kind") == "judgment"}
    assert not any(p == "q1" and s.startswith("openai:sys-a") for s, p in judged)


def _edit_policy(release, change):
    """Rewrite the first policy of a release (change(row) edits it in place)."""
    path = release / "policies.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    change(rows[0])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _edit_meta(release, change):
    path = release / "metadata.json"
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda r: _edit_policy(r, lambda p: p.update(response=["RESPONSE_42"])), "unknown code 'RESPONSE_42'"),
    (lambda r: _edit_policy(r, lambda p: p.update(intent=["INTENT_0", "INTENT_3"], nssi_severity=None,
                                                 suicidal_severity=3)), "INTENT_0"),
    (lambda r: _edit_policy(r, lambda p: p.update(intent=["INTENT_1"])), "severity given without INTENT_2"),
    (lambda r: _edit_policy(r, lambda p: p.update(nssi_severity=99)), "severity must be one of"),
    (lambda r: _edit_policy(r, lambda p: p.update(nssi_severity=None)), "severity is required"),
    (lambda r: _edit_policy(r, lambda p: p.update(archetype="clinician" if p["archetype"] == "peer" else "peer")),
     "metadata.json declares"),
    (lambda r: (r / "metadata.json").unlink(), "metadata.json is missing"),
    (lambda r: _edit_meta(r, lambda m: m["profiles"].pop(next(iter(m["profiles"])))), "not declared in metadata.json"),
    (lambda r: (r / "prompts.jsonl").write_text((r / "prompts.jsonl").read_text().replace(
        '"context": "triage"', '"context": "carrier_pigeon"')), "carrier_pigeon"),
], ids=["unknown-code", "exclusive", "severity-without-intent", "severity-99", "intent-without-severity",
        "archetype", "no-metadata", "undeclared-profile", "unknown-context"])
def test_a_bad_release_is_one_line_before_any_call(tmp_path, capsys, damage, needle):
    """The whole release is checked before the first call: exit 2, one line, no run directory."""
    release = write_release(tmp_path / "release")
    damage(release)
    with StubServer() as stub:
        stub.handler = Scripted()
        out = tmp_path / "run"
        capsys.readouterr()
        assert main(_run_args(release, stub.base_url, out, "--no-cache")) == 2
        assert stub.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("carebench: error:") and needle in err[0], err
    assert not out.exists()


def test_builtin_release_runs_without_calibrating_first(capsys):
    """`plural run --release builtin` plans a run on the package's illustrative release: every
    released prompt has one policy per profile, and the plan answers each sampled prompt once
    per archetype and system, judged by every judge under each distinct policy."""
    import carebench
    from carebench.datasets.prompts import load_policies, load_prompts

    root = Path(carebench.__file__).parent / "data" / "plural" / "release"
    prompts, policies = load_prompts(root / "prompts.jsonl"), load_policies(root / "policies.jsonl")
    assert len(policies) == 6 * len(prompts) == 6 * 85
    meta = json.loads((root / "metadata.json").read_text())
    assert meta["illustrative"] is True
    u = "http://127.0.0.1:9/v1"
    assert main(["plural", "run", "--release", "builtin", "--system", f"openai:s@{u}",
                 *(x for j in "abc" for x in ("--judge", f"openai:j{j}@{u}")), "--limit", "4",
                 "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    stages = {s["name"]: s["calls"] for s in plan["stages"]}
    assert stages["responses"] == 4 * 2  # four prompts, two archetypes, one system
    assert 3 * 8 <= stages["jury"] <= 3 * 8 * 3  # 3 judges x 8 replies x at most 3 distinct policies

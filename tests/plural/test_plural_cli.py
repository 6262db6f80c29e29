"""`carebench plural sample | run | rescore` through the CLI: dry runs, the budget cap, user errors."""

from __future__ import annotations

import json
from pathlib import Path

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

"""Support's model flags are parsed once, in the command, and travel as ``ModelSpec``; the
manifest, records and cache keys hold their text as before. Expected values are written out
by hand or recounted from the stub's request log."""

from __future__ import annotations

import json

from scripted_stub import Script

from carebench.cli import main
from carebench.models.base import ModelSpec
from carebench.models.families import family_of
from carebench.support import coherence, suite
from carebench.support.tasks import load_tasks
from config_capture import capture_config
from stub_server import StubServer


def test_the_command_hands_parsed_specs_to_the_config(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "run_support", capture_config(seen, "run"))
    monkeypatch.setattr(suite, "run_calibration", capture_config(seen, "cal"))
    monkeypatch.setattr(coherence, "run_coherence", capture_config(seen, "coh"))
    url = "http://127.0.0.1:9/v1"
    assert main(["support", "run", "--responder", f"openai:r@{url}/", "--judge", "anthropic:j"]) == 2
    assert main(["support", "calibrate", "--labels", "x.csv", "--candidate", "openai:c"]) == 2
    assert main(["support", "coherence", "--tasks", "builtin:sample", "--model", "openai:m", "--judge", "openai:j"]) == 2
    assert seen["run"].responders == [ModelSpec("openai", "r", url)]
    assert seen["run"].judges == [ModelSpec("anthropic", "j")]
    assert seen["run"].manifest_config()["responders"] == [f"openai:r@{url}"]
    assert seen["cal"].candidates == [ModelSpec("openai", "c")]
    assert (seen["coh"].models, seen["coh"].judge) == ([ModelSpec("openai", "m")], ModelSpec("openai", "j"))


def test_a_malformed_model_flag_is_one_line_and_exit_2(tmp_path, capsys):
    for flags in (["--responder", "gpt-4o", "--judge", "openai:j"], ["--responder", "openai:r", "--judge", "gpt-4o"]):
        rc = main(["support", "run", *flags, "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert rc == 2 and "malformed model spec 'gpt-4o'" in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()
    rc = main(["support", "coherence", "--tasks", "builtin:sample", "--model", "openai:m", "--judge", "nope:j"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown model provider 'nope'" in err and len(err.strip().splitlines()) == 1


def test_a_rerun_hits_the_cache_and_writes_the_specs_text(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url

        def args(slash: str, out: str) -> list[str]:
            return ["support", "run", "--tasks", "builtin:sample", "--responder", f"openai:resp-a@{u}{slash}",
                    "--judge", f"openai:judge-a@{u}", "--judge", f"openai:judge-b@{u}{slash}",
                    "--attempts", "1", "--limit", "2", "--bootstrap", "50", "--out", str(tmp_path / out),
                    "--cache", str(tmp_path / "c.sqlite")]

        assert main(args("/", "one")) == 0  # typed with a trailing slash: the same model
        n = len(stub.requests)
        assert n > 0
        assert main(args("", "two")) == 0
        assert len(stub.requests) == n  # every call of the second run came from the cache
    capsys.readouterr()
    want = [f"openai:resp-a@{u}", f"openai:judge-a@{u}", f"openai:judge-b@{u}"]
    for out in ("one", "two"):
        m = json.loads((tmp_path / out / "manifest.json").read_text())
        assert m["config"]["responders"] == want[:1] and m["config"]["judges"] == want[1:]
        rows = [json.loads(line) for line in (tmp_path / out / "records.jsonl").read_text().splitlines()]
        assert {r["responder"] for r in rows if r["kind"] == "response"} == {want[0]}
        assert {r["judge"] for r in rows if r["kind"] == "verdict"} == set(want[1:])


def test_families_read_the_spec_fields():
    # a base URL, a model directory and a non-spec name, worked out by hand
    assert family_of("openai:gpt-4o@http://127.0.0.1:9/v1") == "openai:gpt"
    assert family_of("replay:/runs/a/Qwen2-7B.jsonl") == "replay:qwen2"
    assert family_of("reference") == "reference"
    assert family_of("acme:sage-j") == "acme:sage"


def test_reference_as_a_responder_names_the_flag_that_includes_the_references(tmp_path, capsys):
    rc = main(["support", "run", "--responder", "reference", "--judge", "openai:j", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "'reference' is reserved for the task references (use --include-reference)" in err
    assert not (tmp_path / "o").exists()

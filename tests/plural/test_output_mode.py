"""Against a server that refuses ``json_schema`` (as llama.cpp's does), a plural run decides
each judge's output mode once: one refused probe per judge model in the stub's request
log, every later structured request already in ``json_object``; the manifest records the
decided mode of every model, as risk's does."""

from __future__ import annotations

import json

from jury_stub import Scripted, write_release

from carebench.cache import CompletionCache
from carebench.plural.experiment import PluralRunConfig
from carebench.plural.suite import run_plural
from carebench.run_options import run_options
from stub_server import StubServer


def test_output_mode_decided_once_per_model_and_recorded(tmp_path):
    release = write_release(tmp_path / "release")
    with StubServer(reject_json_schema=True) as stub:
        stub.handler = Scripted()
        u = stub.base_url
        judges = [f"openai:judge-{j}@{u}" for j in "abc"]
        cfg = PluralRunConfig(release=str(release), systems=[f"openai:sys-a@{u}"], judges=judges,
                              run=run_options(out=tmp_path / "run", progress=False), sample_size=3, bootstrap=50)
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
        requests = list(stub.requests)
    for name in ("judge-a", "judge-b", "judge-c"):
        kinds = [((r.body or {}).get("response_format") or {}).get("type") for r in requests
                 if (r.body or {}).get("model") == name]
        assert kinds.count("json_schema") == 1, kinds  # the one probe, refused
        assert kinds.count("json_object") == len(kinds) - 1 and len(kinds) > 2
    manifest = json.loads((run_dir / "manifest.json").read_text())
    modes = manifest["output_modes"]
    assert {s: m["mode"] for s, m in modes.items()} == {j: "json_object" for j in judges}
    assert all(m["probe"][0]["mode"] == "json_schema" and "refused" in m["probe"][0] for m in modes.values())


def test_output_option_fixes_the_mode_without_a_refused_probe(tmp_path):
    """llama-cpp-python's server logs a traceback for every request it refuses (the issue saw
    three per plural run, one per judge): ``--model-option SPEC:output=json_object`` fixes the
    mode, so the stub's log holds no json_schema request at all, and every judge request the
    run recorded in calls.jsonl reached the stub exactly once."""
    release = write_release(tmp_path / "release")
    with StubServer(reject_json_schema=True) as stub:
        stub.handler = Scripted()
        u = stub.base_url
        judges = [f"openai:judge-{j}@{u}" for j in "abc"]
        opts = [f"{j}:output=json_object" for j in judges]
        cfg = PluralRunConfig(release=str(release), systems=[f"openai:sys-a@{u}"], judges=judges,
                              run=run_options(out=tmp_path / "run", progress=False, model_option=opts),
                              sample_size=3, bootstrap=50)
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
        requests = list(stub.requests)
    calls = [json.loads(x) for x in (run_dir / "calls.jsonl").read_text().splitlines()]
    for spec in judges:
        name = spec.split(":", 1)[1].split("@", 1)[0]
        kinds = [((r.body or {}).get("response_format") or {}).get("type") for r in requests
                 if (r.body or {}).get("model") == name]
        assert kinds and set(kinds) == {"json_object"}, kinds  # no probe was refused
        assert len(kinds) == sum(c["model"] == spec for c in calls)
    assert not any(((r.body or {}).get("response_format") or {}).get("type") == "json_schema" for r in requests)
    modes = json.loads((run_dir / "manifest.json").read_text())["output_modes"]
    assert {s: m["mode"] for s, m in modes.items()} == {j: "json_object" for j in judges}
    assert all(m["probe"] == [{"decided": "json_object", "by": "model option output"}] for m in modes.values())

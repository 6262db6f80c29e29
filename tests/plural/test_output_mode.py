"""Against a server that refuses ``json_schema`` (as llama.cpp's does), a plural run decides
the output mode once per server: one refused probe in the stub's request log for the three
judge models it serves (one per model name only repeated the same refusal, and llama.cpp's
server logs a traceback for each), every later structured request of every judge already
in ``json_object``; the manifest records the decided mode of every model, as risk's does.
Judges on two servers are probed once each."""

from __future__ import annotations

import json

from jury_stub import Scripted, write_release

from carebench.engine.cache import CompletionCache
from carebench.engine.options import run_options
from carebench.plural.commands.run import run_plural
from carebench.plural.config import PluralRunConfig
from stub_server import StubServer


def _kind(r) -> str | None:
    return ((r.body or {}).get("response_format") or {}).get("type")


def test_output_mode_decided_once_per_server_and_recorded(tmp_path):
    release = write_release(tmp_path / "release")
    with StubServer(reject_json_schema=True) as stub:
        stub.handler = Scripted()
        u = stub.base_url
        judges = [f"openai:judge-{j}@{u}" for j in "abc"]
        cfg = PluralRunConfig(release=str(release), systems=[f"openai:sys-a@{u}"], judges=judges,
                              options=run_options(out=tmp_path / "run", progress=False), sample_size=3, bootstrap=50)
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
        requests = list(stub.requests)
    # one refused probe for the whole server (it was one per judge model: three)
    assert [_kind(r) for r in requests].count("json_schema") == 1
    for name in ("judge-a", "judge-b", "judge-c"):
        kinds = [_kind(r) for r in requests if (r.body or {}).get("model") == name]
        assert kinds.count("json_object") == len(kinds) - kinds.count("json_schema") and len(kinds) > 2, kinds
    manifest = json.loads((run_dir / "manifest.json").read_text())
    modes = manifest["output_modes"]
    assert {s: m["mode"] for s, m in modes.items()} == {j: "json_object" for j in judges}
    probed = [s for s, m in modes.items() if m["probe"][0].get("mode") == "json_schema"]
    assert len(probed) == 1 and "refused" in modes[probed[0]]["probe"][0]
    assert all(m["probe"] == [{"decided": "json_object", "by": f"the probe of {probed[0]} on the same server"}]
               for s, m in modes.items() if s != probed[0])


def test_two_servers_are_probed_once_each(tmp_path):
    release = write_release(tmp_path / "release")
    with StubServer(reject_json_schema=True) as llama, StubServer() as other:
        llama.handler = other.handler = Scripted()
        judges = [f"openai:judge-{j}@{llama.base_url}" for j in "ab"] + [
            f"openai:judge-{j}@{other.base_url}" for j in "cd"]
        cfg = PluralRunConfig(release=str(release), systems=[f"openai:sys-a@{other.base_url}"], judges=judges,
                              options=run_options(out=tmp_path / "run", progress=False), sample_size=3, bootstrap=50)
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
        kinds_llama = [_kind(r) for r in llama.requests]
        kinds_other = [_kind(r) for r in other.requests if (r.body or {}).get("model") != "sys-a"]
    assert kinds_llama.count("json_schema") == 1 and set(kinds_llama) == {"json_schema", "json_object"}
    assert set(kinds_other) == {"json_schema"} and len(kinds_other) > 2  # accepted: nothing refused
    modes = json.loads((run_dir / "manifest.json").read_text())["output_modes"]
    assert {s: m["mode"] for s, m in modes.items()} == {
        **{j: "json_object" for j in judges[:2]}, **{j: "json_schema" for j in judges[2:]}}


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
                              options=run_options(out=tmp_path / "run", progress=False, model_option=opts),
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

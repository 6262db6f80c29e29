"""One Anthropic API version for live and batch calls: the live client's header, the
version the manifest records for each Anthropic file, the header the SDK sends when
``batch submit`` creates the batch, and request lines that are requests of that version
(the SDK's own request types, tests/batch/anthropic_versions.py)."""

from __future__ import annotations

import json

from batch.anthropic_versions import BATCH_REQUEST
from batch.fake_batch_api import FakeBatchAPI
from batch.sdk_types import typed_dict_errors
from batch.test_export_import import export
from batch.test_roundtrip_suites import risk_answer
from carebench.batch.manifest import Manifest
from carebench.cli import main


def test_live_and_batch_calls_speak_one_recorded_version(tmp_path, monkeypatch):
    with FakeBatchAPI(risk_answer, polls=0) as api:
        export(tmp_path, monkeypatch, api.base_url)
        bdir = tmp_path / "bdir"
        m = Manifest.load(bdir)
        (entry,) = [f for _, f in m.files() if f["format"] == "anthropic"]
        live_version = _live_header(api)
        assert entry.get("api_version") == live_version
        assert main(["batch", "submit", str(bdir)]) == 0
        sent = [h for method, path, h in api.headers if method == "POST" and path.endswith("/messages/batches")]
        assert len(sent) == 1 and sent[0]["anthropic-version"] == live_version
    from carebench.models.anthropic_native import ANTHROPIC_VERSION

    assert live_version == ANTHROPIC_VERSION  # stated once, in the live client's module


def _live_header(api: FakeBatchAPI) -> str:
    """The anthropic-version header of a live call through the live client."""
    from batch.test_export_import import _req
    from carebench.engine.options import RunOptions
    from carebench.engine.run import Run
    from carebench.engine.runner import Call

    live = Run(RunOptions(use_cache=False, progress=False))
    live.calls([Call(live.model(f"anthropic:claude-haiku-4-5@{api.base_url}"), _req("live one"))])
    got = [h for method, path, h in api.headers if method == "POST" and path.endswith("/v1/messages")]
    assert len(got) == 1
    return got[0]["anthropic-version"]


def test_request_lines_are_requests_of_the_recorded_version(tmp_path, monkeypatch):
    export(tmp_path, monkeypatch)
    m = Manifest.load(tmp_path / "bdir")
    checked = 0
    for _, f in m.files():
        if f["format"] != "anthropic":
            continue
        request_type = BATCH_REQUEST[f.get("api_version")]
        for line in (tmp_path / "bdir" / f["path"]).read_text("utf-8").splitlines():
            obj = json.loads(line)
            assert typed_dict_errors(obj, request_type) == [], obj
            assert 0.0 <= obj["params"]["temperature"] <= 1.0  # the range 2023-06-01 documents
            checked += 1
    assert checked == 4

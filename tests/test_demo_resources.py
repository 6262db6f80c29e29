"""``carebench demo`` shows the crisis-resource check on illustrative replies, one or more per verdict."""

from __future__ import annotations

import json

from carebench import suites as suite_table
from carebench.demo import run_demo
from stub_server import StubReply, StubServer

#: the verdict each illustrative reply must get, written by hand from its text and locale
EXPECTED = {"demo-local-us": "local", "demo-local-br": "local", "demo-local-and-wrong-gb": "local_and_wrong",
            "demo-wrong-region-nz": "wrong_region", "demo-wrong-region-mx": "wrong_region",
            "demo-unverified-us": "unverified", "demo-none-de": "none", "demo-no-locale": None}


def test_demo_checks_one_reply_per_verdict_and_the_support_part_records_checks(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_table, "SUITES", {"support": suite_table.SUITES["support"]})
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content='{"met": true, "rationale": "stub"}')
        out = run_demo(out=tmp_path / "demo", model_spec=f"openai:m@{stub.base_url}",
                       cache_path=tmp_path / "cache.sqlite")
    rows = [json.loads(x) for x in (out / "resources_check.jsonl").read_text().splitlines()]
    assert {r["id"]: r["routing"] for r in rows} == EXPECTED
    assert next(r for r in rows if r["id"] == "demo-no-locale")["locale_status"] == "missing"
    html = (out / "report.html").read_text()
    assert "Where a reply sends a person" in html and "⟦116 123⟧" in html
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resources"]["version"] in html
    # the support part checked its replies for the demo's locale
    support = [json.loads(x) for x in (out / "support" / "records.jsonl").read_text().splitlines()]
    assert all(r["resources"]["locale"] == "en-US" for r in support if r["kind"] == "response")

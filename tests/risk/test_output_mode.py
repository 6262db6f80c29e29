"""Constrained decoding is an explicit, visible option (item 2); the output mode is decided
once per run and recorded in the manifest (item 7)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from carebench.risk.cli import app
from stub_server import StubReply, StubServer


def test_json_decoding_is_named_in_the_report_and_its_mode_in_the_manifest(tmp_path):
    with StubServer(reject_json_schema=True) as stub:
        stub.handler = lambda req: StubReply(content='{"answer": "c"}')
        spec = f"openai:stub@{stub.base_url}"
        res = CliRunner().invoke(app, ["run", "--data", "builtin:sample", "--method",
                                       "llm:decoding=json", "--model", spec, "--bootstrap", "20",
                                       "--no-cache", "--out", str(tmp_path / "r")])
        assert res.exit_code == 0, repr(res.exception)
        kinds = [(r.body.get("response_format") or {}).get("type") for r in stub.requests]
    # one refused probe, then every call with the decided mode
    assert kinds.count("json_schema") == 1 and kinds.count("json_object") == 48
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["output_modes"][spec]["mode"] == "json_object"
    assert "JSON schema" in manifest["output_modes"][spec]["probe"][0]["refused"]
    assert manifest["methods"][0]["options"] == {"decoding": "json"}
    md = (tmp_path / "r" / "report.md").read_text()
    table2 = md[md.index("## Main results"): md.index("## Bootstrap")]
    # the method with its options: the same name in the tables and in the figures' legends
    assert "| llm:decoding=json |" in table2 and "| llm |" not in table2

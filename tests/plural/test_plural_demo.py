"""The plural part of `carebench demo`, against the stub instead of the embedded model."""

from __future__ import annotations

import json

from carebench.datasets.prompts import load_annotations, load_policies
from carebench.plural.data import builtin_path
from carebench.plural.demo import DEMO_CASES, demo_release, run_demo
from stub_server import StubReply, StubServer


def test_demo_release_is_the_practitioners_labels_aliased_like_profiles(tmp_path):
    rel = demo_release(tmp_path / "rel", cases=2)
    policies = load_policies(rel / "policies.jsonl")
    anns = [a for a in load_annotations(builtin_path("annotations.jsonl")) if not a.skipped]
    cases = sorted({a.case_id for a in anns})[:2]
    assert sorted({p.prompt_id for p in policies}) == cases
    assert {p.profile for p in policies} <= {"P1", "P2", "P3", "C1", "C2", "C3"}
    # P1 is the first peer practitioner in name order (prac-a), C1 the first clinician (prac-d)
    first = {(a.practitioner, a.case_id): a for a in anns}
    p1 = next(p for p in policies if p.profile == "P1" and p.prompt_id == cases[0])
    assert p1.response == first[("prac-a", cases[0])].response
    assert json.loads((rel / "metadata.json").read_text())["illustrative"] is True


def test_demo_part_runs_end_to_end(tmp_path):
    def handler(req):
        if req.body.get("response_format"):
            return StubReply(content=json.dumps({"appropriate": True, "categories": ["RESPONSE_2"],
                                                 "rationale": "stub"}))
        return StubReply(content="That sounds hard. I am here to listen.")

    with StubServer() as stub:
        stub.handler = handler
        run = run_demo(tmp_path / "plural", model_spec=f"openai:demo@{stub.base_url}")
    m = json.loads((run / "metrics.json").read_text())
    assert DEMO_CASES == 1  # the quick demo: one case, two replies, six policies each
    assert m["counts"]["prompts"] == DEMO_CASES and len(m["cells"]) == 6
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["warnings"]) == 1  # one model in every seat: one overlap, warned once
    assert "Demonstration only" in (run / "report.md").read_text()


def test_run_writes_records_parquet_and_rescoring_from_it_matches_the_jsonl(tmp_path, monkeypatch):
    """A plural run stores records.parquet; re-scoring from it, and from records.jsonl
    alone (an older run), writes byte-identical metrics.json and reports."""
    import shutil

    import pyarrow.parquet as pq

    from carebench.plural import records as plural_records
    from carebench.plural.commands.run import rescore

    def handler(req):
        if req.body.get("response_format"):
            return StubReply(content=json.dumps({"appropriate": True, "categories": ["RESPONSE_2"],
                                                 "rationale": "stub"}))
        # a reply cut at the cap: a response status ("truncated") no verdict has
        return StubReply(content="That sounds hard. I am here to listen.", finish_reason="length")

    with StubServer() as stub:
        stub.handler = handler
        run = run_demo(tmp_path / "plural", model_spec=f"openai:demo@{stub.base_url}")
    assert "truncated" in (run / "records.jsonl").read_text()
    lines = (run / "records.jsonl").read_text().splitlines()
    table = pq.read_table(run / "records.parquet")
    assert table.num_rows == len(lines)
    # the stored JSON is the JSONL's rows, and the scoring columns hold their fields
    by_line = dict(zip(table["line"].to_pylist(), table["json"].to_pylist(), strict=True))
    assert [by_line[i] for i in range(len(lines))] == lines
    rows = [json.loads(x) for x in lines]
    stored = dict(zip(table["line"].to_pylist(), table["judge"].to_pylist(), strict=True))
    assert [stored[i] for i in range(len(rows))] == [r.get("judge") for r in rows]

    read = []
    real = plural_records._read_columns_parquet
    monkeypatch.setattr(plural_records, "_read_columns_parquet", lambda *a: read.append(1) or real(*a))
    names = ("metrics.json", "report.md", "report.html")
    first = {n: (run / n).read_bytes() for n in names}
    rescore(run)
    assert read == [1]  # re-scored from the Parquet columns
    from_parquet = {n: (run / n).read_bytes() for n in names}
    older = tmp_path / "older"
    shutil.copytree(run, older)
    (older / "records.parquet").unlink()
    rescore(older)
    assert read == [1]  # the older run was read from its JSONL
    from_jsonl = {n: (older / n).read_bytes() for n in names}
    assert from_parquet == first == from_jsonl

"""A risk run's report names every system once: ``llm`` and ``llm:variant=conservative``, each
on two models, are four rows whose names all differ and carry the variant and the model."""

from __future__ import annotations

import json
import re

from carebench.cli import main
from stub_server import StubServer


def test_no_two_systems_of_a_run_share_a_name_in_its_report(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = lambda req: "b"
        specs = [f"openai:{m}@{stub.base_url}" for m in ("model-one", "model-two")]
        args = ["risk", "run", "--data", "builtin:sample", "--method", "llm", "--method", "llm:variant=conservative",
                "--bootstrap", "100", "--no-cache", "--out", str(tmp_path / "r")]
        for s in specs:
            args += ["--model", s]
        assert main(args) == 0
    out = tmp_path / "r"
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    systems = {r["method"] for r in recs}
    assert len(systems) == 4  # two methods x two models, recounted from the records
    md = (out / "report.md").read_text()
    table2 = md[md.index("## Main results"): md.index("## Bootstrap")]
    rows = [c.group(1).strip() for c in re.finditer(r"^\| ([^|]+) \|", table2, re.MULTILINE)]
    named = [r for r in rows if r.startswith("llm")]
    assert len(named) == 4 and len(set(named)) == 4
    assert sum("variant=conservative" in r for r in named) == 2
    assert sum("model-two" in r for r in named) == 2
    # the HTML report carries the same names (escaped)
    html = (out / "report.html").read_text()
    for name in named:
        assert name.replace("&", "&amp;") in html

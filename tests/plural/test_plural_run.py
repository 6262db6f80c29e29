"""End to end: `plural run` against the loopback stub with a scripted jury.

Expected rates are worked out by hand in the comments (per judge, then the
judge mean), not taken from the code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jury_stub import ARCH, BROKEN, EMPTY, Scripted, write_release

from carebench.engine.cache import CompletionCache
from carebench.engine.options import run_options
from carebench.plural.commands.run import rescore, run_plural
from carebench.plural.config import PluralRunConfig
from stub_server import StubServer


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("plural-run")
    release = write_release(tmp_path / "release")
    script = Scripted()
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        spec = {n: f"openai:{n}@{u}" for n in ("sys-a", "sys-b", "judge-a", "judge-b", "judge-c")}
        cfg = PluralRunConfig(
            release=str(release), systems=[spec["sys-a"], spec["sys-b"]],
            judges=[spec["judge-a"], spec["judge-b"], spec["judge-c"]], options=run_options(out=tmp_path / "run", progress=False),
            sample_size=3, bootstrap=200, families={spec["judge-c"]: "acme", spec["sys-b"]: "acme"},
        )
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
        yield run_dir, spec, script, stub


def _cell(m, system, profile):
    return next(c for c in m["cells"] if c["system"] == system and c["profile"] == profile)


def test_scripted_jury_rates_equal_hand_computed(scripted_run):
    run_dir, spec, script, _ = scripted_run
    m = json.loads((run_dir / "metrics.json").read_text())
    a, b = spec["sys-a"], spec["sys-b"]
    ja, jb, jc = spec["judge-a"], spec["judge-b"], spec["judge-c"]
    # sys-a x P1: judge-a full, partial, full; judge-b full, parse failure (failed), full;
    # judge-c failed (inappropriate), full, partial -> full (2/3 + 2/3 + 1/3) / 3 = 5/9
    c = _cell(m, a, "P1")
    assert c["full"]["per_judge"] == {ja: pytest.approx(2 / 3), jb: pytest.approx(2 / 3), jc: pytest.approx(1 / 3)}
    assert c["full"]["value"] == pytest.approx(5 / 9)
    assert c["partial"]["value"] == pytest.approx((1 / 3 + 0 + 1 / 3) / 3)
    assert c["failed"]["value"] == pytest.approx((0 + 1 / 3 + 1 / 3) / 3)
    # coverage: judge-a (1 + 1/2 + 1)/3, judge-b (1 + 0 + 1)/3, judge-c (1 + 1 + 1/2)/3 -> 7/9
    assert c["coverage"]["value"] == pytest.approx(7 / 9)
    lo, hi = c["full"]["ci"]
    assert 0 <= lo <= 5 / 9 <= hi <= 1
    # sys-b x P2: the empty reply to q3 fails for every judge without a call -> 2/3
    assert _cell(m, b, "P2")["full"]["value"] == pytest.approx(2 / 3)
    assert ("sys-b", "peer", "q3") not in {(s, ARCH[p], q) for _, s, p, q in script.judge_requests}
    # sys-b x C1: judge-b's failed call on q1 is left out (1 of 2 -> 2/2 full); judge-a's appropriate
    # reply with nothing satisfied is partial -> full (2/3 + 1 + 1) / 3, partial (1/3) / 3
    c = _cell(m, b, "C1")
    assert c["full"]["per_judge"][jb] == pytest.approx(1.0) and c["full"]["n"] == 3
    assert c["full"]["value"] == pytest.approx(8 / 9)
    assert c["partial"]["value"] == pytest.approx(1 / 9)
    # sys-a x C1: the failed call for q3 is a harness failure: only q1 and q2 are scored, all full
    c = _cell(m, a, "C1")
    assert c["full"]["value"] == pytest.approx(1.0) and c["full"]["n"] == 2
    n = m["counts"]
    assert n["response_harness_failures"] == {a: 1, b: 0}
    assert n["responses_scored_failed_without_judging"] == {a: 0, b: 1}
    assert n["parse_failures_by_system_and_judge"][a] == {ja: 0, jb: 1, jc: 0}
    assert n["judgment_status_by_judge"][jb]["error"] == 1
    assert n["judgment_status_by_judge"][ja]["empty_response"] == 2  # P1 and P2 on sys-b's empty q3


def test_requests_carry_archetype_contract_persona_and_policy(scripted_run):
    run_dir, _, script, _ = scripted_run
    # 2 systems x 2 archetypes x 3 prompts responses; 1 broken, 1 empty
    assert len(script.system_requests) == 12
    *_, msgs = next(r for r in script.system_requests if r[2] == "q2" and r[1] == "clinician")
    assert "Length:" in msgs[0]["content"] and "Triage" in msgs[0]["content"]
    assert "A nurse on night shifts." in msgs[0]["content"] and msgs[1]["content"].startswith("Q2:")
    # every judgeable response x its archetype's profiles x 3 judges, each asked once
    judgeable = 12 - 1 - 1
    peer = sum(1 for r in script.system_requests if r[1] == "peer" and (r[0], r[1], r[2]) not in EMPTY | BROKEN)
    assert len(script.judge_requests) == 3 * (2 * peer + 1 * (judgeable - peer))
    rows = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "response" for r in rows) == 12
    assert {r["status"] for r in rows if r["kind"] == "response"} == {"ok", "empty", "error"}


def test_family_overlap_is_warned(scripted_run):
    run_dir, spec, *_ = scripted_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(manifest["warnings"]) == 1
    assert spec["judge-c"] in manifest["warnings"][0] and spec["sys-b"] in manifest["warnings"][0]
    assert "share the vendor family" in (run_dir / "report.md").read_text()


def test_rescore_reproduces_metrics_byte_for_byte_without_calls(scripted_run, tmp_path):
    run_dir, spec, _, stub = scripted_run
    before = (run_dir / "metrics.json").read_bytes()
    n = len(stub.requests)
    (run_dir / "metrics.json").unlink()
    rescore(run_dir)
    assert (run_dir / "metrics.json").read_bytes() == before
    # leave judge-c out: sys-a x P1 becomes (2/3 + 2/3) / 2
    m2 = rescore(run_dir, judges=[spec["judge-a"], spec["judge-b"]], out_dir=tmp_path / "two")
    assert _cell(m2, spec["sys-a"], "P1")["full"]["value"] == pytest.approx(2 / 3)
    assert len(stub.requests) == n
    assert (run_dir / "metrics.json").read_bytes() == before


def test_report_escapes_dataset_text(scripted_run):
    run_dir, *_ = scripted_run
    html = (run_dir / "report.html").read_text()
    assert "<script>x</script>" not in html and "&lt;script&gt;" in html
    md = (run_dir / "report.md").read_text()
    for title in ("Proxy alignment by profile", "Normalized policy coverage", "Response-category satisfaction",
                  "Alignment by context", "Alignment by severity", "Jury robustness", "Counts"):
        assert title in md
    assert (run_dir / "figures").is_dir() and any((run_dir / "figures").iterdir())


def test_rescore_out_through_the_cli_writes_a_re_renderable_run(scripted_run, tmp_path, capsys):
    """`plural rescore RUN --judge A --judge B --out DIR`: DIR is a complete run directory
    (manifest naming the source run and the judges kept) that `carebench report DIR`
    re-renders byte for byte; the source run is left byte-unchanged."""
    from carebench.cli import main

    run_dir, spec, _, stub = scripted_run
    before = {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}
    n = len(stub.requests)
    out = tmp_path / "loo"
    kept = [spec["judge-a"], spec["judge-b"]]
    assert main(["plural", "rescore", str(run_dir), "--judge", kept[0], "--judge", kept[1], "--out", str(out)]) == 0
    after = {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}
    assert after == before
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rescored_from"]["run"] == str(run_dir)
    assert manifest["rescored_from"]["judges_kept"] == kept
    assert manifest["scoring"]["scored_judges"] == kept
    m = json.loads((out / "metrics.json").read_text())
    # leave judge-c out: sys-a x P1 becomes (2/3 + 2/3) / 2, as hand-computed above
    assert _cell(m, spec["sys-a"], "P1")["full"]["value"] == pytest.approx(2 / 3)
    assert (out / "records.jsonl").read_bytes() == before[Path("records.jsonl")]
    rendered = {f: (out / f).read_bytes() for f in ("metrics.json", "report.md", "report.html")}
    for f in rendered:
        (out / f).unlink()
    assert main(["report", str(out)]) == 0
    assert {f: (out / f).read_bytes() for f in rendered} == rendered
    assert len(stub.requests) == n  # no model call
    # a judge the run never had: one line, exit 2, nothing written
    capsys.readouterr()
    assert main(["plural", "rescore", str(run_dir), "--judge", "openai:nobody", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_reports_show_the_taxonomy_names_with_the_code_beside(scripted_run):
    """Table 15 and the examples read "Clarify / Investigate", not RESPONSE_1: names from
    the taxonomy file (read here with yaml), the code in its own column."""
    from importlib import resources

    import yaml

    run_dir, *_ = scripted_run
    tax = yaml.safe_load((resources.files("carebench") / "data" / "taxonomy.yaml").read_text("utf-8"))
    names = {c["code"]: c["name"] for f in ("intent", "function", "response") for c in tax["fields"][f]}
    md = (run_dir / "report.md").read_text()
    m = json.loads((run_dir / "metrics.json").read_text())
    codes = {c for t in m["categories"].values() for c in t["categories"]}
    assert codes
    md = md.replace("\\_", "_")  # markdown escapes the underscores of codes
    for code in codes:
        assert f"| {names[code]} | {code} |" in md, code
    examples = md.rsplit("Example responses and verdicts", 1)[1]  # the section, not the contents
    assert "RESPONSE_" not in examples
    assert any(names[c] in examples for c in codes)

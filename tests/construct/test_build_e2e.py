"""`construct build` end to end on the built-in illustrative set against the loopback stub."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from construct_stub import Pipeline
from rerender_check import assert_report_reproduces

from carebench.cli import main
from carebench.construct.io import builtin_path
from carebench.datasets.prompts import load_prompts
from carebench.engine.rundir import read_json, read_jsonl
from stub_server import StubServer


def _config(tmp_path, url, **extra):
    m = lambda name: f"openai:{name}@{url}"
    cfg = {"router": m("router"), "judge": m("judge"),
           "rewriters": [m("good"), m("leaky"), m("badformat"), m("plain")],
           "literals": str(tmp_path / "literals.txt"), "embedder": "hashing", **extra}
    (tmp_path / "literals.txt").write_text("forum_sg\n", "utf-8")
    p = tmp_path / "build.yaml"
    import yaml

    p.write_text(yaml.safe_dump(cfg), "utf-8")
    return p


@pytest.fixture(scope="module")
def stub():
    with StubServer() as s:
        s.handler = Pipeline()
        yield s


def test_build_end_to_end(tmp_path, stub, capsys, monkeypatch):
    cfg = _config(tmp_path, stub.base_url, topics=3)
    out = tmp_path / "run"
    rc = main(["construct", "build", "--config", str(cfg), "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    metrics = read_json(out / "metrics.json")
    sel = metrics["selection"]
    by = {t["config"].split(":", 1)[1].split("@")[0]: t for t in sel["table"]}
    assert by["leaky"]["excluded_by"] == ["leakage"]  # the judge path catches the copied source
    assert by["badformat"]["excluded_by"] == ["format"]  # best marker, but fails the format gate
    assert by["good"]["rank"] == 1 and by["plain"]["rank"] == 2
    assert by["good"]["q"] == pytest.approx(5.0) and by["plain"]["q"] == pytest.approx(3.0)

    prompts = load_prompts(out / "prompts.jsonl")  # the plural suite's reader accepts the output
    sources = {json.loads(line)["id"]: json.loads(line) for line in builtin_path("sources").read_text().splitlines()}
    rewriters = {p.rewriter.split(":", 1)[1].split("@")[0] for p in prompts if p.rewriter}
    assert rewriters == {"good", "plain"}
    contexts = {p.context for p in prompts}
    assert contexts == {"forum", "counselor_chat", "platform_search", "triage"}
    for p in prompts:
        assert p.persona.text and p.row_id in sources
        src = sources[p.row_id]  # provenance: the original post and the source dataset
        assert p.source_id == src.get("source_id", src["id"]) and p.source_group == src["source"]
        if p.context == "forum":
            assert sources[p.row_id]["forum"] and p.rewriter is None
    # forum posts keep their wording except planted identifiers (src-012 has a phone number)
    forum = {p.row_id: p.text for p in prompts if p.context == "forum"}
    for sid, text in forum.items():
        if "9123 4567" in sources[sid]["text"]:
            assert "9123 4567" not in text and "[PHONE]" in text
        elif "@sadgirl_sg" in sources[sid]["text"]:
            assert "[HANDLE]" in text
        else:
            assert text == sources[sid]["text"]
    # the persona picker answered 2: every routed row got its second-nearest candidate
    rows = read_jsonl(out / "rows.jsonl")
    assert all(r["persona"]["id"] == r["candidates"][1] for r in rows)
    # counts in and out chain from step to step
    steps = {s["step"]: s for s in metrics["stages"]}
    assert steps["screen"]["in"] == 60
    assert steps["route"]["in"] == steps["screen"]["out"]
    assert steps["anonymize"]["out"] == len(prompts)
    report = (out / "report.md").read_text("utf-8")
    assert "Rewriter selection" in report and "pattern recognizers only" in report
    assert "k-means (3 clusters)" in report  # the config's `topics`
    html = (out / "report.html").read_text("utf-8")
    assert "<script>alert" not in html

    # `carebench report DIR` reproduces metrics, report and figures from the run directory alone,
    # topic table included, with no model or embedding call
    topics = metrics["topics"]
    assert sum(t["prompts"] for t in topics) == len(prompts) and len(topics) == 3
    records = read_jsonl(out / "records.jsonl")
    clusters = Counter(r["cluster"] for r in records if r["kind"] == "topic")
    assert sorted(clusters.values(), reverse=True) == [t["prompts"] for t in topics]
    made = len(stub.requests)

    def no_call(*a, **k):
        raise AssertionError("re-rendering called a model or an embedder")

    with monkeypatch.context() as mp:
        mp.setattr("carebench.models.get_model", no_call)
        mp.setattr("carebench.construct.personas.get_embedder", no_call)
        mp.setattr("carebench.construct.figures.topic_clusters", no_call)
        assert_report_reproduces(out, tmp_path / "copy")
    assert len(stub.requests) == made

    # a second run resumes entirely from the cache
    out2 = tmp_path / "run2"
    assert main(["construct", "build", "--config", str(cfg), "--out", str(out2)]) == 0
    acct = read_json(out2 / "metrics.json")["accounting"]
    assert acct["provider_calls"] == 0 and acct["cache_hits"] > 0
    assert (out2 / "prompts.jsonl").read_text() == (out / "prompts.jsonl").read_text()


def test_leak_caught_by_residual_check(tmp_path, stub, capsys):
    """Run the stages by hand and release the leaky rewrites: the literal check stops it."""
    url = stub.base_url
    r = tmp_path
    assert main(["construct", "screen", "--out", str(r / "s")]) == 0
    assert main(["construct", "route", "--rows", str(r / "s" / "screened.jsonl"), "--model",
                 f"openai:router@{url}", "--embedder", "hashing", "--out", str(r / "r")]) == 0
    assert main(["construct", "rewrite", "--rows", str(r / "r" / "routed.jsonl"), "--rewriter",
                 f"openai:leaky@{url}", "--out", str(r / "w")]) == 0
    assert main(["construct", "judge", "--rows", str(r / "w" / "rewrites.jsonl"), "--judge",
                 f"openai:judge@{url}", "--out", str(r / "j")]) == 0
    judged = read_jsonl(r / "j" / "judged.jsonl")
    assert all(not x["verdict"]["no_leakage"] for x in judged if x.get("rewriter"))
    (r / "lit.txt").write_text("forum_sg\n", "utf-8")
    capsys.readouterr()
    rc = main(["construct", "anonymize", "--rows", str(r / "j" / "judged.jsonl"), "--literals", str(r / "lit.txt"),
               "--keep-gate-failures", "--out", str(r / "a")])
    err = capsys.readouterr().err
    assert rc == 2 and "residual hits" in err and "forum_sg" in err
    assert not (r / "a" / "prompts.jsonl").exists()
    report = (r / "a" / "report.html").read_text("utf-8")
    assert "stopped" in report and report.count("forum_sg") >= 10  # every residual hit is listed
    for d in ("s", "j", "a"):  # stage runs, a stopped one included, re-render byte for byte
        assert_report_reproduces(r / d, r / f"{d}-copy")
    # with the judge's gates applied, no leaky rewrite is released and nothing residual remains
    assert main(["construct", "anonymize", "--rows", str(r / "j" / "judged.jsonl"), "--literals",
                 str(r / "lit.txt"), "--out", str(r / "b")]) == 0
    assert all(p.context == "forum" for p in load_prompts(r / "b" / "prompts.jsonl"))


def test_budget_stop_leaves_no_prompts(tmp_path, stub, capsys, monkeypatch, price_per_call):
    """A zero budget stops at the first uncached paid call: the run says how to resume and
    writes no prompts (nothing half-written)."""
    # every model $1 a call: an unpriced call costs 0 and fits any budget
    price_per_call(1.0, "router", "judge", "good", "leaky", "badformat", "plain")
    monkeypatch.setenv("CAREBENCH_CACHE", str(tmp_path / "fresh.sqlite"))
    cfg = _config(tmp_path, stub.base_url)
    out = tmp_path / "run"
    rc = main(["construct", "build", "--config", str(cfg), "--out", str(out), "--budget", "0"])
    err = capsys.readouterr().err
    assert rc == 3 and "budget" in err and "resume" in err and "error" not in err
    assert not (out / "prompts.jsonl").exists()
    assert read_json(out / "manifest.json")["status"] == "incomplete"


def test_route_with_attribute_filter(tmp_path, stub):
    """--attributes filter: every candidate satisfies the sketch's guesses (age 15-24,
    Single, Student in the stub), and the manifest states the mode."""
    url = stub.base_url
    assert main(["construct", "screen", "--keep-share", "0", "--out", str(tmp_path / "s")]) == 0
    assert main(["construct", "route", "--rows", str(tmp_path / "s" / "screened.jsonl"), "--model",
                 f"openai:router@{url}", "--embedder", "hashing", "--attributes", "filter",
                 "--out", str(tmp_path / "r")]) == 0
    personas = {json.loads(line)["id"]: json.loads(line) for line in builtin_path("personas").read_text().splitlines()}
    fits = {pid for pid, p in personas.items()
            if 15 <= p["age"] <= 24 and p["marital_status"] == "Single" and p["occupation"] == "Student"}
    rows = read_jsonl(tmp_path / "r" / "routed.jsonl")
    assert rows and all(set(r["candidates"]) <= fits and len(r["candidates"]) == min(10, len(fits)) for r in rows)
    assert read_json(tmp_path / "r" / "manifest.json")["config"]["attributes"] == "filter"


def test_screen_with_llm_classifier(tmp_path, stub):
    """The stub's classifier calls every row relevant with proxy INTENT_1: all rows are
    retained, by lexicon where a term matches and by the classifier otherwise."""
    assert main(["construct", "screen", "--classifier", f"llm:openai:clf@{stub.base_url}",
                 "--out", str(tmp_path / "s")]) == 0
    rows = read_jsonl(tmp_path / "s" / "screened.jsonl")
    assert len(rows) == 60
    assert {r["screen_reason"] for r in rows} == {"lexicon", "classifier"}
    assert all(r["proxy"] == {"proxy": True, "intent": ["INTENT_1"], "nssi_severity": None,
                              "suicidal_severity": None, "score": 1.0} for r in rows)
    assert all(bool(r["lexicon_hits"]) == (r["screen_reason"] == "lexicon") for r in rows)


def test_fusion_drafts_then_revises(tmp_path, stub):
    """fusion:A+B: A's draft goes to B with the same task; the row keeps B's revision."""
    url = stub.base_url
    assert main(["construct", "screen", "--keep-share", "0", "--out", str(tmp_path / "s")]) == 0
    assert main(["construct", "route", "--rows", str(tmp_path / "s" / "screened.jsonl"), "--model",
                 f"openai:router@{url}", "--embedder", "hashing", "--out", str(tmp_path / "r")]) == 0
    before = len(stub.requests)
    fusion = f"fusion:openai:badformat@{url}+openai:good@{url}"
    assert main(["construct", "rewrite", "--rows", str(tmp_path / "r" / "routed.jsonl"), "--rewriter", fusion,
                 "--forum-share", "0", "--out", str(tmp_path / "w")]) == 0
    rows = read_jsonl(tmp_path / "w" / "rewrites.jsonl")
    assert rows and all(r["rewriter"] == fusion and r["output"].startswith("[q5] Hi") for r in rows)
    new = stub.requests[before:]
    drafts = [q for q in new if q.body["model"] == "badformat"]
    revisions = [q for q in new if q.body["model"] == "good"]
    assert len(drafts) == len(rows) == len(revisions)
    assert all("DRAFT\nRewrite: [q5]" in q.body["messages"][-1]["content"] for q in revisions)


def test_calls_failed_after_retries_are_harness_failures_not_gate_failures(tmp_path, capsys, monkeypatch):
    """One source row whose rewrite calls answer HTTP 500 on every try: no configuration is
    judged on it (none is excluded for it), the row is not released, and the build ends
    incomplete with one line and exit 1."""
    from outage import fast_retries
    from stub_server import StubReply

    fast_retries(monkeypatch)
    pipeline = Pipeline()
    with StubServer() as clean:
        clean.handler = pipeline
        cfg = _config(tmp_path, clean.base_url)
        assert main(["construct", "build", "--config", str(cfg), "--out", str(tmp_path / "ok"), "--no-cache"]) == 0
        rows = read_jsonl(tmp_path / "ok" / "rows.jsonl")
    victim = next(r for r in rows if r["context"] != "forum")
    rewriters = {"good", "leaky", "badformat", "plain"}

    def handler(req):
        if req.body.get("model") in rewriters and victim["text"] in req.body["messages"][-1]["content"]:
            return StubReply(status=500)
        return pipeline(req)

    with StubServer() as stub:
        stub.handler = handler
        cfg = _config(tmp_path, stub.base_url)
        out = tmp_path / "run"
        capsys.readouterr()
        rc = main(["construct", "build", "--config", str(cfg), "--out", str(out), "--no-cache"])
        tries = sum(1 for r in stub.requests if r.body.get("model") in rewriters
                    and victim["text"] in r.body["messages"][-1]["content"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("carebench:")]
    assert rc == 1 and len(err) == 1 and "run incomplete" in err[0], err
    # one selection rewrite per configuration and the row's own rewrite, seven tries each
    assert tries == 5 * 7
    manifest = read_json(out / "manifest.json")
    assert manifest["status"] == "incomplete" and manifest["failed_calls"] == 5
    by = {t["config"].split(":", 1)[1].split("@")[0]: t
          for t in read_json(out / "metrics.json")["selection"]["table"]}
    # the same gates as without the outage: the lost rewrites count against nobody
    ok_by = {t["config"].split(":", 1)[1].split("@")[0]: t
             for t in read_json(tmp_path / "ok" / "metrics.json")["selection"]["table"]}
    assert all(t["failed_rewrites"] == 0 for t in by.values())
    assert by["good"]["rank"] == 1 and by["plain"]["rank"] == 2
    assert {k: t["excluded_by"] for k, t in by.items()} == {k: t["excluded_by"] for k, t in ok_by.items()}
    assert all(not p.id.startswith(victim["id"] + "-") for p in load_prompts(out / "prompts.jsonl"))


def test_a_build_that_releases_nothing_warns_and_exits_1(tmp_path, capsys):
    """No configuration passes the gates and no forum post is kept: one warning line, exit 1;
    --allow-empty accepts it."""
    with StubServer() as stub:
        stub.handler = Pipeline()
        m = lambda name: f"openai:{name}@{stub.base_url}"
        cfg = _config(tmp_path, stub.base_url, rewriters=[m("leaky"), m("badformat")], forum_share=0.0)
        capsys.readouterr()
        rc = main(["construct", "build", "--config", str(cfg), "--out", str(tmp_path / "a")])
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("carebench:")]
        assert rc == 1 and len(err) == 1 and "released 0 prompts" in err[0], err
        assert read_jsonl(tmp_path / "a" / "prompts.jsonl") == []
        assert main(["construct", "build", "--config", str(cfg), "--out", str(tmp_path / "b"), "--allow-empty"]) == 0

"""The run skeleton: ``carebench report DIR`` reproduces a run's metrics.json and report
byte for byte from the records alone, for every suite and for the few-shot sweep, and a
sweep writes calls.jsonl that ``replay:`` answers from."""

from __future__ import annotations

import json

from carebench.cli import main
from carebench.support.tasks import load_tasks
from risk.test_every_method import answer
from stub_server import StubServer
from support.scripted_stub import Script

OUTPUTS = ("metrics.json", "report.md", "report.html")


def _reproduced(run_dir, monkeypatch) -> None:
    """Re-rendered twice: reusing the run's figures (nothing may be drawn), then with
    ``figures/`` removed (every chart drawn anew); both give the run's bytes."""
    import shutil

    from matplotlib.figure import Figure as MplFigure

    before = {n: (run_dir / n).read_bytes() for n in OUTPUTS}
    figures = {p.name: p.read_bytes() for p in (run_dir / "figures").glob("*.png")}
    for n in OUTPUTS:
        (run_dir / n).unlink()
    with monkeypatch.context() as m:
        m.setattr(MplFigure, "savefig", lambda *a, **k: (_ for _ in ()).throw(AssertionError("drawn")))
        assert main(["report", str(run_dir)]) == 0
    for n in OUTPUTS:
        assert (run_dir / n).read_bytes() == before[n], n
    shutil.rmtree(run_dir / "figures", ignore_errors=True)
    assert main(["report", str(run_dir)]) == 0
    for n in OUTPUTS:
        assert (run_dir / n).read_bytes() == before[n], n
    assert {p.name: p.read_bytes() for p in (run_dir / "figures").glob("*.png")} == figures


def test_report_reproduces_risk_support_and_sweep_runs(tmp_path, monkeypatch):
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = answer
        u = stub.base_url
        risk = tmp_path / "risk"
        assert main(["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{u}",
                     "--method", "tfidf-lr", "--method", "llm", "--bootstrap", "50",
                     "--out", str(risk)]) == 0
        sweep = tmp_path / "sweep"
        args = ["risk", "sweep", "--data", "builtin:sample", "--k", "2", "--k", "4",
                "--pool-per-level", "2", "--bootstrap", "50"]
        assert main([*args, "--model", f"openai:stub@{u}", "--out", str(sweep)]) == 0
        made = stub.count()
        # the sweep's calls.jsonl answers a replay of it: no new call, same numbers
        replayed = tmp_path / "replayed"
        assert main([*args, "--model", f"replay:{sweep}", "--out", str(replayed), "--no-cache"]) == 0
        assert stub.count() == made
        stub.handler = Script(tasks)
        support = tmp_path / "support"
        assert main(["support", "run", "--responder", f"openai:resp-a@{u}",
                     *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                     "--attempts", "1", "--limit", "3", "--bootstrap", "50", "--out", str(support)]) == 0
    calls = [json.loads(x) for x in (sweep / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 3 * (48 - 4 * 2)  # 3 arms x the items outside the 8-post pool
    assert {c["model"] for c in calls} == {f"openai:stub@{u}"}
    m_sweep, m_replay = (json.loads((d / "metrics.json").read_text()) for d in (sweep, replayed))
    assert m_sweep["methods"] == m_replay["methods"]
    assert "Few-shot scaling (Appendix G)" in (sweep / "report.md").read_text()
    assert json.loads((sweep / "manifest.json").read_text())["sweep"]["ks"] == [0, 2, 4]
    for run_dir in (risk, sweep, support):
        _reproduced(run_dir, monkeypatch)
    assert (sweep / "figures" / "fig4_fewshot_sweep.png").is_file()


def test_support_rescore_reads_parquet_and_falls_back_to_jsonl(tmp_path):
    import os

    import pyarrow.parquet as pq

    tasks = load_tasks("builtin:sample")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        assert main(["support", "run", "--responder", f"openai:resp-a@{u}", "--judge", f"openai:judge-a@{u}",
                     "--attempts", "2", "--limit", "3", "--bootstrap", "50", "--out", str(out)]) == 0
    jsonl = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    table = pq.read_table(out / "records.parquet")
    # the same rows, grouped by kind and task; column ``line`` gives each row's JSONL line
    assert table["kind"].to_pylist() == sorted(r["kind"] for r in jsonl)
    lines = table["line"].to_pylist()
    assert sorted(lines) == list(range(len(jsonl)))
    assert [json.loads(s) for s in table["json"].to_pylist()] == [jsonl[i] for i in lines]
    assert table["task_id"].to_pylist() == [jsonl[i]["task_id"] for i in lines]
    assert table.to_pylist() == sorted(table.to_pylist(), key=lambda r: (r["kind"], r["task_id"], r["line"]))
    metrics = (out / "metrics.json").read_bytes()  # scored from the Parquet copy
    written = {n: (out / n).read_bytes() for n in (*OUTPUTS, "task_scores.csv")}  # by `support run`
    for n in written:
        (out / n).unlink()
    assert main(["support", "rescore", str(out)]) == 0  # from records.parquet: the run's bytes
    assert {n: (out / n).read_bytes() for n in written} == written
    parquet = (out / "records.parquet").read_bytes()
    os.remove(out / "records.parquet")  # an older run, JSONL only: the same numbers and report
    for n in written:
        (out / n).unlink()
    assert main(["support", "rescore", str(out)]) == 0
    assert {n: (out / n).read_bytes() for n in written} == written
    (out / "records.parquet").write_bytes(parquet)
    # a hand-edited records.jsonl (one verdict flipped) is newer than the Parquet copy: it wins
    flip = next(i for i, r in enumerate(jsonl) if r["kind"] == "verdict" and r["met"] is True)
    jsonl[flip]["met"] = False
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in jsonl))
    assert main(["support", "rescore", str(out)]) == 0
    assert (out / "metrics.json").read_bytes() != metrics


def test_family_override_reaches_self_preference(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        judge, resp = f"openai:judge-a@{u}", f"openai:resp-a@{u}"
        assert main(["support", "run", "--responder", resp, "--responder", f"openai:resp-b@{u}",
                     "--judge", judge, "--judge", f"openai:judge-b@{u}", "--attempts", "1", "--limit", "2",
                     "--bootstrap", "20",
                     "--out", str(out), "--family", f"{judge}=acme", "--family", f"{resp}=acme"]) == 0
    fams = json.loads((out / "metrics.json").read_text())["self_preference"]["families"]
    # without the override both would be guessed as "openai:judge"/"openai:resp"
    assert fams["judges"][judge] == "acme" and fams["responders"][resp] == "acme"
    assert fams["responders"][f"openai:resp-b@{u}"] == "openai:resp"
    assert json.loads((out / "manifest.json").read_text())["scoring"]["family"] == {judge: "acme", resp: "acme"}
    assert main(["support", "rescore", str(out), "--family", "nonsense"]) == 2
    assert "--family expects SPEC=NAME" in capsys.readouterr().err


def test_parquet_with_all_null_columns_reads_like_the_jsonl(tmp_path):
    """Every verdict failed (met null in every row): the Parquet column has the null type."""
    import os

    from carebench.engine.skeleton import write_records
    from carebench.support.records import PARQUET_COLUMNS, read_run_records

    rows = [{"kind": "response", "task_id": "t1", "responder": "m", "attempt": 0, "turns": [],
             "final_reply": "hi", "status": "ok"}]
    rows += [{"kind": "verdict", "task_id": "t1", "responder": "m", "attempt": 0, "criterion_id": f"c{k}",
              "judge": "j", "met": None, "rationale": "", "status": "error", "scope": "final"} for k in range(3)]
    write_records(tmp_path, rows, PARQUET_COLUMNS)
    rt, vt = read_run_records(tmp_path)
    os.remove(tmp_path / "records.parquet")
    rt2, vt2 = read_run_records(tmp_path)
    assert len(vt) == len(vt2) == 3 and len(rt) == len(rt2) == 1
    assert vt.met.tolist() == vt2.met.tolist() and vt.status.tolist() == vt2.status.tolist()

"""``carebench support run | rescore | calibrate`` end to end through the top-level CLI."""

from __future__ import annotations

import csv
import json

import pytest
from scripted_stub import Script

from carebench.cli import main
from carebench.support.tasks import load_tasks
from stub_server import StubServer


def test_run_then_rescore_then_dry_run(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")
    script = Script(tasks)
    script.script[("judge-a", "resp-a", tasks[0].id, 0, tasks[0].criteria[0].id)] = "garbage"
    out = tmp_path / "run"
    prompt = tmp_path / "system.txt"
    prompt.write_text("You are a supportive assistant.\n")
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        args = ["support", "run", "--tasks", "builtin:sample", "--responder", f"openai:resp-a@{u}",
                "--judge", f"openai:judge-a@{u}", "--judge", f"openai:judge-b@{u}", "--judge", f"openai:judge-c@{u}",
                "--attempts", "1", "--limit", "3", "--scope", "both", "--system-prompt", str(prompt),
                "--include-reference", "--out", str(out), "--bootstrap", "200", "--cache", str(tmp_path / "c.sqlite"),
                "--cap", f"openai:resp-a@{u}=99"]
        assert main(args) == 0
        first = capsys.readouterr().out
        assert "reference ceiling" in first and "report.html" in first
        n = len(stub.requests)
        assert all(r.body["max_tokens"] == 99 for r in stub.requests if r.body["model"] == "resp-a")
        assert all(r.body["messages"][0]["content"] == "You are a supportive assistant."
                   for r in stub.requests if r.body["model"] == "resp-a")
        for name in ("manifest.json", "records.jsonl", "calls.jsonl", "tasks.jsonl", "metrics.json",
                     "report.md", "report.html"):
            assert (out / name).is_file(), name
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["suite"] == "support" and manifest["config"]["attempts"] == 1
        metrics = (out / "metrics.json").read_bytes()
        m = json.loads(metrics)
        assert m["counts"]["votes_parse_error"] == 1
        assert "scope_sensitivity" in m  # both scopes judged
        # rescore: same metrics, no model call
        assert main(["support", "rescore", str(out)]) == 0
        assert (out / "metrics.json").read_bytes() == metrics and len(stub.requests) == n
        assert main(["support", "rescore", str(out), "--scope", "anywhere", "--out", str(tmp_path / "any")]) == 0
        assert json.loads((tmp_path / "any" / "metrics.json").read_text())["config"]["scope"] == "anywhere"
        # carebench report DIR re-renders through the support report module
        assert main(["report", str(out)]) == 0
        assert (out / "metrics.json").read_bytes() == metrics
        # dry run: the whole run's plan; every call the run made is now cached, none is made
        capsys.readouterr()
        assert main([*args, "--dry-run", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert (plan["suite"], plan["calls"], plan["cached"], plan["to_make"]) == ("support", n, n, 0)
        assert [s["name"] for s in plan["stages"]] == ["generation", "judging"]
        assert all(s["exact"] for s in plan["stages"])
        assert plan["stages"][0]["calls"] == sum(len(t.turns) for t in tasks[:3])
        assert len(stub.requests) == n


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"id": "x"}\n')
    assert main(["support", "run", "--tasks", str(bad), "--responder", "openai:m", "--judge", "openai:j"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("carebench: error:") and f"{bad}:1" in err and len(err.strip().splitlines()) == 1
    assert main(["support", "run", "--responder", "openai:m", "--judge", "openai:j", "--scope", "sideways"]) == 2
    assert main(["support", "run", "--responder", "openai:m"]) == 2
    assert main(["support", "rescore", str(tmp_path)]) == 2


def _one_judge_run(tasks_file, url, out, *extra):
    """A one-attempt run of resp-a judged by judge-a: the replies clinicians label."""
    assert main(["support", "run", "--tasks", str(tasks_file), "--responder", f"openai:resp-a@{url}",
                 "--judge", f"openai:judge-a@{url}", "--attempts", "1", "--out", str(out), "--bootstrap", "20",
                 *extra]) == 0
    return out


def test_calibrate_selects_the_panel_closest_to_consensus(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")[:2]
    from carebench.support.tasks import write_tasks

    tf = tmp_path / "tasks.jsonl"
    write_tasks(tf, tasks)
    # clinician labels: a fixed pattern per criterion; three raters, one disagreeing now and then
    truth = {(t.id, c.id): (k % 3 != 0) for t in tasks for k, c in enumerate(t.criteria)}
    script = Script(tasks)
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        out = _one_judge_run(tf, u, tmp_path / "run", "--cache", str(tmp_path / "c.sqlite"))
        labels = tmp_path / "labels.csv"
        with labels.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["task_id", "response_id", "criterion_id", "rater", "met"])
            for i, ((tid, cid), met) in enumerate(sorted(truth.items())):
                for r in ("r1", "r2", "r3"):
                    flip = r == "r3" and i % 4 == 0
                    w.writerow([tid, f"openai:resp-a@{u}#0", cid, r, str(met != flip).lower()])
        # candidates: a, b agree with consensus; c wrong on every fifth item; d always the opposite
        script.script.clear()
        for k, ((tid, cid), met) in enumerate(sorted(truth.items())):
            for j in ("judge-a", "judge-b"):
                script.script[(j, "resp-a", tid, 0, cid)] = met
            script.script[("judge-c", "resp-a", tid, 0, cid)] = met if k % 5 else not met
            script.script[("judge-d", "resp-a", tid, 0, cid)] = not met
        cands = [f"openai:judge-{x}@{u}" for x in "abcd"]
        cal = tmp_path / "cal"
        args = ["support", "calibrate", "--labels", str(labels), "--run", str(out), "--out", str(cal),
                "--bootstrap", "100", "--no-cache"]  # judge-a's cached run verdicts were different
        for c in cands:
            args += ["--candidate", c]
        before = len(stub.requests)
        capsys.readouterr()
        assert main([*args, "--dry-run", "--json"]) == 0  # the plan: every candidate on every labelled criterion
        plan = json.loads(capsys.readouterr().out)
        assert [(s["name"], s["calls"]) for s in plan["stages"]] == [("candidate verdicts", 4 * len(truth))]
        assert len(stub.requests) == before and not cal.exists()  # nothing called, nothing written
        assert main(args) == 0
        assert len(stub.requests) == before + 4 * len(truth)
    res = json.loads((cal / "metrics.json").read_text())
    sel = res["selection"]
    assert sel["n_panels"] == 4  # C(4, 3)
    # any panel with a and b has a majority equal to consensus (kappa 1); {a,b,c} and {a,b,d} tie on
    # kappa, macro-F1 and agreement, so the documented tie-break (sorted names) picks {a,b,c}
    assert sel["selected"] == cands[:3]
    assert sel["panels"][0]["kappa"] == 1.0
    assert res["candidates"][cands[3]]["kappa"] < 0 < res["candidates"][cands[2]]["kappa"] < 1.0
    assert (cal / "report.html").exists()


def test_budget_stop_then_resume_from_cache(tmp_path, capsys, price_per_call):
    price_per_call(1.0, "resp-a", "judge-a")  # every model of a budgeted run needs a price
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        out = tmp_path / "run"
        args = ["support", "run", "--responder", f"openai:resp-a@{u}", "--judge", f"openai:judge-a@{u}",
                "--attempts", "1", "--limit", "2", "--out", str(out), "--bootstrap", "50",
                "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "1"]
        assert main([*args, "--budget", "1"]) == 3
        assert "budget" in capsys.readouterr().err
        made = [r for r in stub.requests if r.body["model"] == "resp-a"]
        assert len(made) == 1  # the first call spent the budget; nothing else started
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "incomplete" and manifest["incomplete"] == ["generation", "judging"]
        assert not any(r.body["model"] == "judge-a" for r in stub.requests)
        assert main(args) == 0  # same directory, resumed: the paid call comes from the cache
        again = [r for r in stub.requests if r.body["model"] == "resp-a"]
        # tasks: one single-turn, one three-turn -> 4 responder calls in all, none repeated
        assert len(again) == 4 and len({r.raw for r in again}) == 4
        assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_user_task_set_with_23_own_subcategories_loads_and_runs(tmp_path, capsys):
    """Item 1 of the fidelity issue: a task file with 23 subcategory names of the user's own
    runs end to end; --subcategories warns (one line, not an error) about names outside it."""
    from test_tasks import USER_SUBCATEGORIES, _row

    tasks_path = tmp_path / "own.jsonl"
    rows = [_row(f"own{i:02d}", subcategory=name, turns=[f"user message of task {i}"])
            for i, name in enumerate(USER_SUBCATEGORIES)]
    tasks_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected = tmp_path / "expected.txt"
    expected.write_text("\n".join(USER_SUBCATEGORIES[:-1]) + "\n")  # the last name is undeclared
    script = Script(load_tasks(tasks_path))
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        out = tmp_path / "run"
        assert main(["support", "run", "--tasks", str(tasks_path), "--responder", f"openai:resp-a@{u}",
                     "--judge", f"openai:judge-a@{u}", "--attempts", "1", "--bootstrap", "50",
                     "--subcategories", str(expected), "--out", str(out),
                     "--cache", str(tmp_path / "c.sqlite")]) == 0
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if ln.startswith("carebench: warning:")]
    assert len(warnings) == 1 and "academic_misconduct (1 task)" in warnings[0]
    m = json.loads((out / "metrics.json").read_text())
    by_sub = m["slices"]["subcategory"]["values"]
    assert len(by_sub) == 23 and all(v["n_tasks"] == 1 for v in by_sub.values())
    assert "housing_insecurity" in by_sub and "academic_misconduct" in by_sub
    assert "academic_misconduct" in (out / "report.html").read_text()


def test_per_responder_temperature_and_cap(tmp_path):
    """Appendix G: settings per responder, from a file and SPEC:key=value (which wins);
    the requests carry them and the manifest records what each responder ran with."""
    tasks = load_tasks("builtin:sample")
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        a, b = f"openai:resp-a@{u}", f"openai:resp-b@{u}"
        settings = tmp_path / "gen.toml"
        settings.write_text(f'["{a}"]\ntemperature = 0.3\nmax_tokens = 500\n')
        out = tmp_path / "run"
        assert main(["support", "run", "--tasks", "builtin:sample", "--limit", "1", "--responder", a,
                     "--responder", b, "--judge", f"openai:judge-a@{u}", "--attempts", "1", "--bootstrap", "20",
                     "--responder-settings", str(settings), "--responder-option", f"{a}:temperature=1",
                     "--out", str(out), "--no-cache"]) == 0
        by_model = {r.body["model"]: r.body for r in stub.requests if r.body["model"].startswith("resp-")}
    assert (by_model["resp-a"]["temperature"], by_model["resp-a"]["max_tokens"]) == (1.0, 500)
    assert (by_model["resp-b"]["temperature"], by_model["resp-b"]["max_tokens"]) == (0.7, 4096)
    gen = json.loads((out / "manifest.json").read_text())["generation"]
    assert gen[a] == {"temperature": 1.0, "max_tokens": 500, "top_p": None}
    assert main(["support", "run", "--responder", a, "--judge", "openai:j", "--responder-option", "x:temp=1"]) == 2


def test_calibrate_in_both_scopes_compares_their_agreement(tmp_path):
    """B.9: candidates asked in final-turn and credit-anywhere scope; the kappa of each scope
    against the clinician consensus is reported (recomputed here with sklearn)."""
    from sklearn.metrics import cohen_kappa_score

    from carebench.support.tasks import write_tasks

    tasks = load_tasks("builtin:sample")[:2]
    assert [len(t.turns) > 1 for t in tasks] == [False, True]
    tf = tmp_path / "tasks.jsonl"
    write_tasks(tf, tasks)
    truth = {(t.id, c.id): (k % 3 != 0) for t in tasks for k, c in enumerate(t.criteria)}
    script = Script(tasks)

    def handler(req):  # judge-a says "not met" to every credit-anywhere question
        prompt = req.body["messages"][-1]["content"]
        if req.body["model"] == "judge-a" and "every assistant message" in prompt:
            return json.dumps({"met": False, "rationale": "anywhere"})
        return script(req)

    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        out = _one_judge_run(tf, u, tmp_path / "run", "--no-cache")
        labels = tmp_path / "labels.csv"
        with labels.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["task_id", "response_id", "criterion_id", "rater", "met"])
            for (tid, cid), met in sorted(truth.items()):
                for r in ("r1", "r2", "r3"):
                    w.writerow([tid, f"openai:resp-a@{u}#0", cid, r, str(met).lower()])
        script.script.clear()
        for (tid, cid), met in truth.items():
            script.script[("judge-a", "resp-a", tid, 0, cid)] = met
        cal = tmp_path / "cal"
        assert main(["support", "calibrate", "--labels", str(labels), "--run", str(out), "--out", str(cal),
                     "--candidate", f"openai:judge-a@{u}", "--panel-size", "1", "--scope", "both",
                     "--bootstrap", "20", "--no-cache"]) == 0
    res = json.loads((cal / "metrics.json").read_text())
    keys = sorted(truth)
    cons = [int(truth[k]) for k in keys]
    anywhere = [int(truth[k]) if k[0] == tasks[0].id else 0 for k in keys]  # single-turn: one question
    comp = res["scope_comparison"]["candidates"]
    judge = f"openai:judge-a@{u}"
    assert comp["final"][judge]["kappa"] == pytest.approx(1.0)
    assert comp["anywhere"][judge]["kappa"] == pytest.approx(cohen_kappa_score(cons, anywhere))
    assert res["scope_comparison"]["by_scope"]["anywhere"]["kappa"] == pytest.approx(cohen_kappa_score(cons, anywhere))
    assert "credit anywhere" in (cal / "report.md").read_text()


def test_split_option_runs_one_half(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")
    private = [t for t in tasks if t.metadata.split == "private"]
    assert 0 < len(private) < len(tasks)
    assert main(["support", "run", "--responder", "openai:m@http://127.0.0.1:9/v1", "--judge", "openai:j@http://127.0.0.1:9/v1",
                 "--split", "private", "--dry-run", "--json", "--attempts", "1", "--cache", str(tmp_path / "c.sqlite")]) == 0
    plan = json.loads(capsys.readouterr().out)
    gen = next(s for s in plan["stages"] if s["name"] == "generation")
    assert gen["calls"] == sum(len(t.turns) for t in private)
    assert main(["support", "run", "--responder", "openai:m", "--judge", "openai:j", "--split", "secret"]) == 2


def test_a_panel_of_one_model_or_the_responders_family_is_warned(tmp_path, capsys):
    """Three seats of one judge share one cached answer; a judge of the responder's family
    may prefer its replies. Both are warned (stderr, manifest) and the self-preference
    section says which case it is; a clean panel says so too."""
    with StubServer() as stub:
        stub.handler = Script(load_tasks("builtin:sample"))
        u = stub.base_url
        a, j, k = f"openai:resp-a@{u}", f"openai:judge-a@{u}", f"openai:judge-b@{u}"
        common = ["support", "run", "--tasks", "builtin:sample", "--limit", "1", "--responder", a,
                  "--attempts", "1", "--bootstrap", "20", "--no-cache"]
        capsys.readouterr()
        assert main([*common, "--judge", j, "--judge", j, "--judge", j, "--out", str(tmp_path / "same")]) == 0
        err = capsys.readouterr().err
        assert "carebench: warning: 3 of the 3 judge seats are the same model" in err
        assert main([*common, "--judge", j, "--judge", k, "--family", f"{k}=acme", "--family", f"{a}=acme",
                     "--out", str(tmp_path / "family")]) == 0
        err = capsys.readouterr().err
        assert f"judge {k} and responder {a} share the vendor family 'acme'" in err and "same model" not in err
        assert main([*common, "--judge", j, "--judge", k, "--out", str(tmp_path / "clean")]) == 0
        assert "warning" not in capsys.readouterr().err
    same = (tmp_path / "same" / "report.md").read_text()
    robustness = same.split("Judge robustness", 1)[1]
    assert "Panel independence: 3 of the 3 judge seats are the same model" in robustness
    fam = json.loads((tmp_path / "family" / "manifest.json").read_text())["panel_warnings"]
    assert len(fam) == 1 and "share the vendor family 'acme'" in fam[0]
    assert "none shares a responder's vendor family" in (tmp_path / "clean" / "report.md").read_text()

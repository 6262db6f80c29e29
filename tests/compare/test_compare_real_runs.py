"""`carebench compare` on directories written by the suites themselves (not by the test
helpers): a support run against the loopback stub with scripted verdicts, and risk runs of
offline baselines. Expected values are the hand-worked ones of tests/support/test_run_e2e.py."""

from __future__ import annotations

import json

import pytest
from test_run_e2e import _scripted, _write_tasks

from carebench.cli import main
from carebench.engine.cache import CompletionCache
from carebench.engine.options import run_options
from carebench.support.config import SupportRunConfig
from carebench.support.suite import run_support
from carebench.support.tasks import load_tasks
from stub_server import StubServer


@pytest.fixture(scope="module")
def support_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-support")
    tasks_path = _write_tasks(tmp / "tasks.jsonl")
    script = _scripted(load_tasks(tasks_path))
    with StubServer() as stub:
        stub.handler = script
        spec = {n: f"openai:{n}@{stub.base_url}" for n in ("resp-a", "resp-b", "judge-a", "judge-b", "judge-c")}
        cfg = SupportRunConfig(
            tasks=str(tasks_path), responders=[spec["resp-a"], spec["resp-b"]],
            judges=[spec["judge-a"], spec["judge-b"], spec["judge-c"]], attempts=2, include_reference=True,
            bootstrap=300, options=run_options(out=tmp / "run", progress=False))
        run_dir = run_support(cfg, cache=CompletionCache(tmp / "c.sqlite"))
    return tmp, run_dir, spec


def test_a_support_run_compared_with_itself(support_run, capsys):
    tmp, run_dir, spec = support_run
    a, b = spec["resp-a"], spec["resp-b"]
    assert main(["compare", str(run_dir), str(run_dir), "--out", str(tmp / "cmp")]) == 0
    m = json.loads((tmp / "cmp" / "metrics.json").read_text())
    assert [(p["base"], p["candidate"]) for p in m["pairs"]] == [(a, a), (b, b)]  # the reference is no system
    rows = {(p["base"], r["metric"]): r for p in m["pairs"] for r in p["rows"]}
    # hand-worked in tests/support/test_run_e2e.py: resp-a 0.9, resp-b 55/120
    assert rows[a, "score"]["base"] == pytest.approx(0.9)
    assert rows[b, "score"]["base"] == pytest.approx(55 / 120)
    # recognized but not routed: resp-a recognizes 4 conversations and misses resources once
    assert rows[a, "recognized_not_routed"]["base"] == pytest.approx(1 / 4)
    assert all(r["diff"] == 0 and r["verdict"] == "not separable" for r in rows.values())
    assert m["pairs"][0]["n_units"] == 2


def test_the_responder_option_pairs_two_responders_of_one_run(support_run, capsys):
    tmp, run_dir, spec = support_run
    a, b = spec["resp-a"], spec["resp-b"]
    rc = main(["compare", str(run_dir), str(run_dir), "--responder", f"{a}={b}", "--out", str(tmp / "ab"),
               "--bootstrap", "200"])
    m = json.loads((tmp / "ab" / "metrics.json").read_text())
    row = next(r for r in m["pairs"][0]["rows"] if r["metric"] == "score")
    assert row["diff"] == pytest.approx(55 / 120 - 0.9)
    assert rc == (1 if row["verdict"] == "regression" else 0)


def test_risk_runs_of_offline_baselines(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    cache = str(tmp_path / "c.sqlite")
    for out, method in ((a, "tfidf-lr"), (b, "tfidf-ordinal")):
        assert main(["risk", "run", "--data", "builtin:sample", "--method", method, "--out", str(out),
                     "--cache", cache]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp"), "--bootstrap", "300"]) in (0, 1)
    m = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert m["settings"]["pairs"] == [["tfidf-lr", "tfidf-ordinal"]]  # the only method of each run
    rows = {r["metric"]: r for r in m["pairs"][0]["rows"]}
    ma = json.loads((a / "metrics.json").read_text())["methods"]["tfidf-lr"]
    mb = json.loads((b / "metrics.json").read_text())["methods"]["tfidf-ordinal"]
    for k in ("accuracy", "macro_f1", "weighted_f1", "qwk", "mae", "adjacent_accuracy", "high_risk_f1"):
        assert rows[k]["base"] == pytest.approx(ma[k]["value"]) and rows[k]["candidate"] == pytest.approx(mb[k]["value"])
    assert m["pairs"][0]["n_units"] == ma["n_scored"]
    gated = [(r["metric"], r["verdict"] == "regression") for r in m["pairs"][0]["rows"] if r["gated"]]
    assert [g for g, _ in gated] == ["macro_f1", "qwk"]


def test_a_plural_run_of_the_scripted_jury(tmp_path, capsys):
    from jury_stub import Scripted, write_release

    from carebench.plural.commands.run import run_plural
    from carebench.plural.config import PluralRunConfig

    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = Scripted()
        spec = {n: f"openai:{n}@{stub.base_url}" for n in ("sys-a", "sys-b", "judge-a", "judge-b", "judge-c")}
        cfg = PluralRunConfig(release=str(release), systems=[spec["sys-a"], spec["sys-b"]],
                              judges=[spec["judge-a"], spec["judge-b"], spec["judge-c"]],
                              options=run_options(out=tmp_path / "run", progress=False), sample_size=3, bootstrap=200)
        run_dir = run_plural(cfg, cache=CompletionCache(tmp_path / "c.sqlite"))
    capsys.readouterr()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    if manifest.get("status") == "incomplete":  # the script's failed calls are harness failures
        rc = main(["compare", str(run_dir), str(run_dir)])
        assert rc == 2 and "incomplete run" in capsys.readouterr().err
        manifest = {**manifest, "status": "complete", "incomplete": []}
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
    a, b = spec["sys-a"], spec["sys-b"]
    rc = main(["compare", str(run_dir), str(run_dir), "--system", f"{a}={b}", "--out", str(tmp_path / "cmp"),
               "--bootstrap", "200"])
    m = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    rows = {r["metric"]: r for r in m["pairs"][0]["rows"]}
    # hand-worked in tests/plural/test_plural_run.py: sys-a x P1 full 5/9, sys-b x C1 full 8/9
    assert rows["full:P1"]["base"] == pytest.approx(5 / 9)
    assert rows["full:C1"]["candidate"] == pytest.approx(8 / 9)
    assert rows["coverage:P1"]["base"] == pytest.approx(7 / 9)
    assert {k for k, r in rows.items() if r["gated"]} == {"full:P1", "full:P2", "full:C1"}
    assert m["pairs"][0]["n_clusters"] == 2  # q1, q2 from source s1; q3 from s2
    assert rc in (0, 1)


def test_one_responder_with_its_own_option_is_another_leaderboard_row(tmp_path, capsys):
    """A per-responder setting changes the answers, so it is part of the system's name: the
    same spec in two runs, once with its own temperature, is two rows, not a duplicate."""
    tasks_path = _write_tasks(tmp_path / "tasks.jsonl")
    script = _scripted(load_tasks(tasks_path))
    dirs = []
    with StubServer() as stub:
        stub.handler = script
        spec = {n: f"openai:{n}@{stub.base_url}" for n in ("resp-a", "judge-a", "judge-b", "judge-c")}
        for k, opts in enumerate(([], [f"{spec['resp-a']}:temperature=1"])):
            cfg = SupportRunConfig(
                tasks=str(tasks_path), responders=[spec["resp-a"]], responder_options=opts,
                judges=[spec["judge-a"], spec["judge-b"], spec["judge-c"]], attempts=2, bootstrap=200,
                options=run_options(out=tmp_path / f"run{k}", progress=False))
            dirs.append(run_support(cfg, cache=CompletionCache(tmp_path / "c.sqlite")))
    capsys.readouterr()
    assert main(["leaderboard", *map(str, dirs), "--out", str(tmp_path / "lb"), "--bootstrap", "200"]) == 0
    m = json.loads((tmp_path / "lb" / "metrics.json").read_text())
    rows = m["boards"][0]["rows"]
    assert not m["duplicates"] and sorted(r["system"] for r in rows) == sorted(
        [spec["resp-a"], f"{spec['resp-a']} {{temperature=1.0}}"])
    # hand-worked in tests/support/test_run_e2e.py: resp-a scores 0.9 whatever its temperature here
    assert all(r["value"] == pytest.approx(0.9) for r in rows)

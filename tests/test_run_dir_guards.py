"""A command never writes over a run directory that is not its own: a compare or leaderboard
given one of its input runs as ``--out``, a run given another suite's directory, a re-score
given another run's. Each is one line, exit 2, and every file of the other run is unchanged
(compared by SHA-256 before and after)."""

from __future__ import annotations

import json

import pytest
from run_dirs import support_tasks, write_risk_run, write_support_run

from carebench.cli import main
from file_tree import tree_hashes


@pytest.fixture
def runs(tmp_path):
    gold = {f"i{k}": k % 4 for k in range(12)}
    a = write_risk_run(tmp_path / "a", gold, {"m1": {i: (g + (i == "i3")) % 4 for i, g in gold.items()}},
                       rerender=True)
    b = write_risk_run(tmp_path / "b", gold, {"m2": {i: (g + (i in ("i1", "i5"))) % 4 for i, g in gold.items()}},
                       rerender=True)
    s = write_support_run(tmp_path / "s", support_tasks(3), ["openai:r1"], lambda *x: True, rerender=True)
    return a, b, s


def _refused(capsys, args, fragment):
    capsys.readouterr()
    assert main(args) == 2
    stderr = capsys.readouterr().err
    err = [x for x in stderr.splitlines() if x.startswith("carebench:")]  # not the progress lines
    assert "Traceback" not in stderr and len(err) == 1 and fragment in err[0], err


def test_compare_and_leaderboard_never_write_over_an_input_run(runs, capsys):
    a, b, _ = runs
    before = {p: tree_hashes(p) for p in (a, b)}
    _refused(capsys, ["leaderboard", str(a), str(b), "--out", str(a), "--bootstrap", "20"], "holds a risk run")
    _refused(capsys, ["compare", str(a), str(b), "--out", str(b), "--bootstrap", "20"], "holds a risk run")
    assert {p: tree_hashes(p) for p in (a, b)} == before
    out = a.parent / "lb"
    assert main(["leaderboard", str(a), str(b), "--out", str(out), "--bootstrap", "20"]) == 0
    assert main(["leaderboard", str(a), str(b), "--out", str(out), "--bootstrap", "20"]) == 0  # its own: again


def test_a_run_never_writes_into_another_suites_run(runs, capsys):
    _, _, s = runs
    before = tree_hashes(s)
    _refused(capsys, ["risk", "run", "--data", "builtin:sample", "--method", "keyword", "--out", str(s),
                      "--no-cache"], "holds a support run")
    assert tree_hashes(s) == before


def test_a_rescore_never_writes_into_another_run(runs, capsys):
    a, _, s = runs
    before = tree_hashes(a)
    _refused(capsys, ["support", "rescore", str(s), "--out", str(a)], "is another run's directory")
    assert tree_hashes(a) == before
    assert main(["support", "rescore", str(s), "--out", str(s.parent / "rescored")]) == 0
    assert main(["support", "rescore", str(s), "--out", str(s.parent / "rescored")]) == 0  # its own folder: again


@pytest.mark.parametrize("manifest", [[1, 2], {"status": "complete"}, "text"])
def test_report_on_a_manifest_that_is_no_run_s_is_one_line(tmp_path, capsys, manifest):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text(json.dumps(manifest))
    _refused(capsys, ["report", str(tmp_path / "x")], "is not a carebench manifest")


def test_another_command_of_the_same_suite_never_writes_over_a_run(runs, tmp_path, capsys):
    """A support coherence check given a support run as --out: refused before anything is
    written (the calls it made are cached), and the run's files are unchanged."""
    from stub_server import StubReply, StubServer

    _, _, s = runs
    before = tree_hashes(s)

    def handler(req):
        if req.body["model"].startswith("resp"):
            return StubReply(content="a reply")
        return StubReply(content=json.dumps({"met": True, "rationale": "fine"}))

    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        _refused(capsys, ["support", "coherence", "--tasks", "builtin:sample", "--model", f"openai:resp@{u}",
                          "--judge", f"openai:judge@{u}", "--n", "1", "--out", str(s), "--cache",
                          str(tmp_path / "c.sqlite")], "holds a support run, not a support coherence run")
        assert tree_hashes(s) == before
        made = len(stub.requests)
        assert main(["support", "coherence", "--tasks", "builtin:sample", "--model", f"openai:resp@{u}",
                     "--judge", f"openai:judge@{u}", "--n", "1", "--out", str(tmp_path / "gate"), "--cache",
                     str(tmp_path / "c.sqlite")]) == 0
        assert len(stub.requests) == made  # every call of the refused run was kept in the cache


def test_an_out_below_a_file_is_refused_before_any_call(tmp_path, capsys):
    from stub_server import StubReply, StubServer

    (tmp_path / "afile").write_text("x")
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content='{"level": "Ideation"}')
        _refused(capsys, ["risk", "run", "--data", "builtin:sample", "--method", "llm", "--model",
                          f"openai:m@{stub.base_url}", "--out", str(tmp_path / "afile" / "sub"), "--no-cache"],
                 "is not a folder")
        assert stub.requests == []


@pytest.mark.parametrize("cache", ["afile/c.sqlite", "afile/deeper/c.sqlite"])
def test_a_cache_path_below_a_file_is_one_line(tmp_path, capsys, cache):
    (tmp_path / "afile").write_text("x")
    _refused(capsys, ["risk", "run", "--data", "builtin:sample", "--method", "tfidf-lr", "--out",
                      str(tmp_path / "o"), "--cache", str(tmp_path / cache), "--bootstrap", "20"], "cannot open cache")
    assert not (tmp_path / "o").exists()


def test_spaces_around_a_spec_s_parts_name_the_same_model():
    from carebench.models.base import ModelSpec, parse_spec

    want = ModelSpec("openai", "m", "http://127.0.0.1:9/v1")
    for text in ("openai:m@http://127.0.0.1:9/v1", "openai: m @ http://127.0.0.1:9/v1/", " openai:m @http://127.0.0.1:9/v1"):
        assert parse_spec(text) == want, text
    assert str(parse_spec("openai: m @http://127.0.0.1:9/v1")) == "openai:m@http://127.0.0.1:9/v1"


def test_a_sweep_never_writes_over_a_risk_run_nor_converse_judge_over_its_source(runs, tmp_path, capsys):
    from risk.test_every_method import answer
    from stub_server import StubServer

    a, _, _ = runs
    before = tree_hashes(a)
    with StubServer() as stub:
        stub.handler = answer
        _refused(capsys, ["risk", "sweep", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                          "--k", "2", "--pool-per-level", "2", "--bootstrap", "20", "--out", str(a), "--no-cache"],
                 "holds a risk run, not a risk sweep run")
    _refused(capsys, ["converse", "judge", str(a), "--rubric", "builtin:sample", "--judge",
                      "openai:j@http://127.0.0.1:9/v1", "--out", str(a)], "is the run whose conversations are judged")
    assert tree_hashes(a) == before


def test_a_plural_rescore_never_writes_over_another_plural_command_s_run(tmp_path, capsys):
    from run_dirs import write_plural_run

    prompts = [{"id": f"q{i}", "source_id": f"s{i}", "context": "forum", "text": f"prompt {i}"} for i in range(4)]
    policies = {("P1", p["id"]): ["RESPONSE_1"] for p in prompts}
    run = write_plural_run(tmp_path / "run", prompts, policies, {"P1": "peer"}, ["sys"], ["j1"],
                           lambda s, pr, q, j: (True, policies[(pr, q)]))
    other = tmp_path / "calibrate"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"suite": "plural", "kind": "calibrate", "status": "complete"}))
    (other / "profiles.jsonl").write_text("{}\n")
    before = tree_hashes(other)
    _refused(capsys, ["plural", "rescore", str(run), "--out", str(other)], "holds a plural calibrate run")
    assert tree_hashes(other) == before

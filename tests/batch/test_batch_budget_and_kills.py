"""--dry-run --batch prices at batch rates, --budget caps what a round writes (exit 3, one
line, nothing written), and kills during export and import leave nothing that looks
complete and is not."""

from __future__ import annotations

import json

import pytest

from batch.test_export_import import _fixtures, export
from carebench.batch.manifest import Manifest
from carebench.cli import main
from carebench.engine.cache import CompletionCache
from stub_server import StubServer


def _risk(url: str) -> list[str]:
    return ["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{url}", "--method", "llm",
            "--method", "vote:voters=variants", "--bootstrap", "50"]


def test_dry_run_prices_at_batch_rates(tmp_path, monkeypatch, capsys, price_per_call):
    price_per_call(1.0, "stub")  # $1 a call live, so $0.50 through a batch
    with StubServer() as stub:
        args = [*_risk(stub.base_url), "--dry-run", "--json", "--cache", str(tmp_path / "c.sqlite")]
        assert main(args) == 0
        live = json.loads(capsys.readouterr().out)
        monkeypatch.setenv("CAREBENCH_BATCH_DIR", str(tmp_path / "bdir"))
        assert main(args) == 0
        batch = json.loads(capsys.readouterr().out)
        assert not stub.requests
    assert live["to_make"] == batch["to_make"] == 48 + 3 * 48  # llm, and the vote's three variants
    assert live["estimated_cost_usd"] == pytest.approx(192.0)
    assert batch["estimated_cost_usd"] == pytest.approx(96.0)
    assert not (tmp_path / "bdir").exists()  # a dry run writes nothing


def test_budget_caps_what_a_round_writes(tmp_path, monkeypatch, capsys, price_per_call):
    price_per_call(1.0, "stub")
    with StubServer() as stub:
        args = [*_risk(stub.base_url), "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite")]
        assert main([*args[:-4], "--out", str(tmp_path / "live"), "--no-cache"]) == 0
        distinct = len({r.raw for r in stub.requests})  # the vote shares one variant with llm
        stub.reset()
        monkeypatch.setenv("CAREBENCH_BATCH_DIR", str(tmp_path / "bdir"))
        assert main([*args, "--budget", "50"]) == 3  # at $0.50 a request, more than $50
        err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]
        assert len(err) == 1 and "batch round not written" in err[0], err
        assert f"(${distinct * 0.5:.2f} for {distinct} requests)" in err[0]
        assert not (tmp_path / "bdir" / "manifest.json").exists()
        assert not any((tmp_path / "bdir").glob("round-*")) if (tmp_path / "bdir").exists() else True
        assert main([*args, "--budget", "100"]) == 4
        assert not stub.requests
    (rnd,) = Manifest.load(tmp_path / "bdir").rounds
    assert rnd["requests"] == distinct and rnd["worst_case_usd"] == pytest.approx(distinct * 0.5)


def test_killed_export_leaves_no_listed_round_and_resumes(tmp_path, monkeypatch):
    run, _, _ = export(tmp_path, monkeypatch)  # a complete first round
    bdir = tmp_path / "bdir"
    first = (bdir / "manifest.json").read_bytes()
    import shutil

    shutil.rmtree(bdir)
    (bdir).mkdir()
    run.batch._manifest = None

    def die(path):
        raise KeyboardInterrupt  # killed after the first file of the round is complete

    with pytest.raises(KeyboardInterrupt):
        run.batch.write(on_file=die)
    assert not (bdir / "manifest.json").exists() and not (bdir / "round-001").exists()
    assert [p.name for p in bdir.iterdir()] == [".round-001.tmp"]  # hidden, never listed
    _, _, line = export(tmp_path, monkeypatch)  # the same command again
    assert line.startswith("7 requests in 2 files")
    assert sorted(p.name for p in bdir.iterdir()) == ["manifest.json", "round-001"]
    assert json.loads((bdir / "manifest.json").read_text())["rounds"][0]["files"] == \
        json.loads(first)["rounds"][0]["files"]


def test_killed_import_stores_nothing_and_a_second_import_finishes(tmp_path, monkeypatch):
    out, err, ant, _, _ = _fixtures(tmp_path, monkeypatch)
    import carebench.batch.import_ as imp

    real = imp.stored_for
    n = {"k": 0}

    def die_on_second(*args):
        parse = real(*args)

        def dying(body):
            n["k"] += 1
            if n["k"] == 2:  # killed while the second answer is parsed
                raise KeyboardInterrupt
            return parse(body)

        return dying

    monkeypatch.setattr(imp, "stored_for", die_on_second)
    cache = tmp_path / "c.sqlite"
    with pytest.raises(KeyboardInterrupt):
        imp.import_results(tmp_path / "bdir", [out, err, ant], CompletionCache(cache))
    assert len(CompletionCache(cache)) == 0 and not (tmp_path / "bdir" / "errors.jsonl").exists()
    monkeypatch.setattr(imp, "stored_for", real)
    counts = imp.import_results(tmp_path / "bdir", [out, err, ant], CompletionCache(cache))
    assert (counts.imported, counts.errors, counts.already_cached) == (2, 5, 0)


def test_budget_caps_the_whole_batch_directory_across_rounds(tmp_path, monkeypatch, capsys):
    """Support, tasks of 1, 3, 1 and 2 user turns, 2 attempts: the responder's rounds are 8, 4
    and 2 requests (4 tasks x 2; the 2 tasks of 2+ turns x 2; the 3-turn task x 2), then the
    panel's verdicts. The responder costs $0.02 a call live, so $0.01 through a batch (half);
    the judges cost nothing. Each round alone fits $0.10; together they do not."""
    from batch.fake_run_batch import fake_run_batch
    from batch.rounds import live, metrics
    from carebench.models.pricing import price_table
    from carebench.support.tasks import load_tasks
    from support.scripted_stub import Script

    prices = tmp_path / "prices.toml"
    prices.write_text('[models]\n"resp-a" = [0.0, 0.0, 0.02]\n"resp-b" = [0.0, 0.0, 0.02]\n'
                      + "".join(f'"judge-{j}" = [0.0, 0.0, 0.0]\n' for j in "abc"))
    monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
    price_table.cache_clear()
    tasks = load_tasks("builtin:sample")[:4]
    bdir, cache = tmp_path / "bdir", tmp_path / "batch.sqlite"

    def support(u: str, responder: str = "resp-a", limit: int = 4, attempts: int = 2) -> list[str]:
        return ["support", "run", "--responder", f"openai:{responder}@{u}",
                *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                "--attempts", str(attempts), "--limit", str(limit), "--bootstrap", "50"]

    def run(args: list[str], budget: str) -> tuple[int, list[str]]:
        rc = main([*args, "--out", str(tmp_path / "batch"), "--cache", str(cache), "--batch", str(bdir),
                   "--batch-format", "vllm", "--budget", budget])
        return rc, [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]

    def answer_last_round() -> None:
        outs = []
        for f in Manifest.load(bdir).rounds[-1]["files"]:
            dst = bdir / "results" / (f["path"].split("/")[-1] + ".out")
            dst.parent.mkdir(exist_ok=True)
            fake_run_batch(bdir / f["path"], dst, Script(tasks))
            outs.append(str(dst))
        assert main(["batch", "import", *outs, "--dir", str(bdir), "--cache", str(cache)]) == 0

    def state() -> tuple[bytes, list[str]]:
        return (bdir / "manifest.json").read_bytes(), sorted(p.name for p in bdir.iterdir())

    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        live(support(u), tmp_path / "live", tmp_path / "live.sqlite")
        stub.reset()
        assert run(support(u), "0.10")[0] == 4  # round 1: 8 x $0.01 = $0.08
        assert [r["requests"] for r in Manifest.load(bdir).rounds] == [8]
        assert Manifest.load(bdir).rounds[0]["worst_case_usd"] == pytest.approx(0.08)

        # another command into the same directory before round 1 is imported: 3 requests,
        # $0.03, fit alone, but $0.08 of round 1 still waits: $0.11 > $0.10
        before = state()
        rc, err = run(support(u, "resp-b", limit=1, attempts=3), "0.10")
        assert rc == 3 and len(err) == 1, err
        assert "($0.03 for 3 requests) with $0.08 worst case of 1 earlier round still waiting" in err[0]
        assert "re-run with --budget 0.11 or more" in err[0]
        assert state() == before  # nothing written

        answer_last_round()
        before = state()
        # round 2 alone is 4 x $0.01 = $0.04, but round 1's answers cost $0.08: $0.12 > $0.10
        rc, err = run(support(u), "0.10")
        assert rc == 3 and len(err) == 1, err
        assert ("batch round not written: its worst case at batch prices ($0.04 for 4 requests) with $0.08 of "
                "answers already imported") in err[0] and "re-run with --budget 0.12 or more" in err[0]
        assert state() == before
        assert run(support(u), "0.12")[0] == 4  # raised: it goes on
        r1, r2 = Manifest.load(bdir).rounds
        assert (r1["settled"], r1["answers_usd"], r2["requests"]) == (True, pytest.approx(0.08), 4)

        answer_last_round()
        # round 3: 2 x $0.01; $0.08 + $0.04 answered + $0.02 = $0.14 > $0.12
        rc, err = run(support(u), "0.12")
        assert rc == 3 and "($0.02 for 2 requests) with $0.12 of answers" in err[0], err
        assert run(support(u), "0.14")[0] == 4
        answer_last_round()
        assert run(support(u), "0.14")[0] == 4  # the panel's verdicts: $0
        assert Manifest.load(bdir).rounds[-1]["worst_case_usd"] == 0
        answer_last_round()
        assert run(support(u), "0.14")[0] == 0
        assert not stub.requests  # no round made a live call
    assert [r["requests"] for r in Manifest.load(bdir).rounds][:3] == [8, 4, 2]
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")


def test_committed_counts_imported_answers_once_and_settles_rounds(tmp_path, monkeypatch):
    """The fixtures' round: 7 requests; answers for one gpt-4o-mini (22 in, 2 out) and one
    claude-haiku-4-5 request (11 in, 36 out), errors for the other five."""
    from carebench.batch.export import BatchSink
    from carebench.batch.import_ import import_results
    from carebench.batch.options import BatchOptions

    out, err, ant, _, _ = _fixtures(tmp_path, monkeypatch)
    bdir, cache = tmp_path / "bdir", CompletionCache(tmp_path / "c.sqlite")
    worst = Manifest.load(bdir).rounds[0]["worst_case_usd"]
    assert worst > 0
    assert BatchSink(BatchOptions(bdir)).committed(cache) == (0.0, worst, 1)  # nothing imported yet
    import_results(bdir, [out], cache)
    oa = (22 * 0.075 + 2 * 0.30) / 1e6  # gpt-4o-mini at half its $0.15 / $0.60 per 1M tokens
    answered, waiting, n = BatchSink(BatchOptions(bdir)).committed(cache)
    assert answered == pytest.approx(oa) and (waiting, n) == (worst, 1)  # 6 requests still wait
    for _ in range(2):  # importing twice counts nothing twice
        import_results(bdir, [out, err, ant], cache)
    sink = BatchSink(BatchOptions(bdir))
    answered, waiting, n = sink.committed(cache)
    ant_usd = (11 * 0.5 + 36 * 2.5) / 1e6  # claude-haiku-4-5 at half its $1 / $5
    assert answered == pytest.approx(oa + ant_usd) and (waiting, n) == (0.0, 0)
    (rnd,) = sink.manifest.rounds
    assert rnd["settled"] is True and rnd["answers_usd"] == pytest.approx(oa + ant_usd)

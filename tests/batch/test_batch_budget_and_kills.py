"""--dry-run --batch prices at batch rates, --budget caps what a round writes (exit 3, one
line, nothing written), and kills during export and import leave nothing that looks
complete and is not."""

from __future__ import annotations

import json

import pytest

from batch.test_export_import import _fixtures, export
from carebench.batch.manifest import Manifest
from carebench.cache import CompletionCache
from carebench.cli import main
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

    real = imp.parser_for
    n = {"k": 0}

    def die_on_second(*args):
        parse = real(*args)

        def dying(body):
            n["k"] += 1
            if n["k"] == 2:  # killed while the second answer is parsed
                raise KeyboardInterrupt
            return parse(body)

        return dying

    monkeypatch.setattr(imp, "parser_for", die_on_second)
    cache = tmp_path / "c.sqlite"
    with pytest.raises(KeyboardInterrupt):
        imp.import_results(tmp_path / "bdir", [out, err, ant], CompletionCache(cache))
    assert len(CompletionCache(cache)) == 0 and not (tmp_path / "bdir" / "errors.jsonl").exists()
    monkeypatch.setattr(imp, "parser_for", real)
    counts = imp.import_results(tmp_path / "bdir", [out, err, ant], CompletionCache(cache))
    assert (counts.imported, counts.errors, counts.already_cached) == (2, 5, 0)

"""Drive a command through batch mode round by round with the fake run_batch, and run
it live against the same stub, for the round-trip tests."""

from __future__ import annotations

import json
from pathlib import Path

from batch.fake_run_batch import fake_run_batch
from carebench.batch.manifest import Manifest
from carebench.cli import main


def live(args: list[str], out: Path, cache: Path) -> None:
    assert main([*args, "--out", str(out), "--cache", str(cache)]) == 0


def batch_rounds(args: list[str], out: Path, cache: Path, bdir: Path, handler, monkeypatch,
                 max_rounds: int = 12, after_round=None) -> int:
    """Rounds of (command --batch DIR --batch-format vllm -> exit 4 -> fake run_batch ->
    import) until the command exits 0; returns the number of rounds that wrote requests.
    ``after_round(n)``, if given, is called after the command wrote round ``n`` (before its
    results are imported), to inspect what that run wrote."""
    for done in range(max_rounds + 1):
        rc = main([*args, "--out", str(out), "--cache", str(cache), "--batch", str(bdir),
                   "--batch-format", "vllm"])
        if rc == 0:
            return done
        assert rc == 4, rc
        rounds = done + 1  # this run wrote round number `rounds`
        m = Manifest.load(bdir, must_exist=True)
        last = m.rounds[-1]
        assert last["round"] == rounds
        if after_round is not None:
            after_round(rounds)
        outs = []
        for f in last["files"]:
            assert f["format"] == "vllm"
            dst = bdir / "results" / (Path(f["path"]).stem + ".output.jsonl")
            dst.parent.mkdir(exist_ok=True)
            assert fake_run_batch(bdir / f["path"], dst, handler) == f["requests"]
            outs.append(str(dst))
        assert main(["batch", "import", *outs, "--dir", str(bdir), "--cache", str(cache)]) == 0
    raise AssertionError(f"not done after {max_rounds} rounds")


def metrics(run_dir: Path) -> dict:
    """metrics.json without latency and queue-wait figures (a batch answer has no latency of its own, and
    two live runs never share theirs) and without the run's call bookkeeping (construct
    copies its accounting into metrics: a resumed run answers from the cache, so its
    provider-call and cache-hit counts differ from a fresh live run's, as any resumed
    live run's do); every other number must be identical."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()
                    if "latency" not in k and "queue_wait" not in k and k != "accounting" and not k.endswith("_from_cache")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    data = json.loads((run_dir / "metrics.json").read_text())
    assert data.get("status") != "incomplete"
    return strip(data)

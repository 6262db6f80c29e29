"""Run directories for the view tests: two real risk runs (offline baselines on the built-in
sample), a support run with a hostile reply, an embedded-model run, and a compare of the risk runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from run_dirs import support_tasks, write_risk_run, write_support_run

from carebench.cli import main

HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> "quoted" & done'
#: a word only one reply holds, for the search tests
NEEDLE = "marmalade"


def met(r, t, a, c, j):
    return hashlib.sha256(f"{r}|{t}|{a}|{c}|{j}".encode()).digest()[0] < (200 if r.endswith("a") else 120)


def reply(r, t, a):
    if t == "t01" and r.endswith("b"):
        return f"I hear you. {HOSTILE} Would toast with {NEEDLE} help right now?"
    return f"reply of {r} to {t}"


def make_runs(root: Path, cache: Path) -> dict[str, Path]:
    """The runs under ``root/runs`` by name (``main`` must be importable; the risk runs take ~4 s each)."""
    runs = root / "runs"
    out = {}
    for name, method in (("risk-lr", "tfidf-lr"), ("risk-ord", "tfidf-ordinal")):
        out[name] = runs / name
        assert main(["risk", "run", "--data", "builtin:sample", "--method", method, "--out", str(out[name]),
                     "--bootstrap", "200", "--cache", str(cache)]) == 0
    out["support"] = write_support_run(runs / "nested" / "support", support_tasks(4),
                                       ["openai:resp-a", "openai:resp-b"], met, reply=reply, rerender=True)
    out["embedded"] = write_risk_run(
        runs / "embedded", {f"i{k}": k % 4 for k in range(8)},
        {"llm": {f"i{k}": (k + (k % 3 == 0)) % 4 for k in range(8)}}, rerender=True)
    mf = out["embedded"] / "manifest.json"
    manifest = json.loads(mf.read_text())
    manifest["models"] = ["llamacpp:builtin"]
    mf.write_text(json.dumps(manifest))
    out["compare"] = runs / "cmp"
    assert main(["compare", str(out["risk-lr"]), str(out["risk-ord"]), "--out", str(out["compare"]),
                 "--bootstrap", "200"]) in (0, 1)
    return out


def make_demo(out: Path, cache: Path) -> Path:
    """``carebench demo`` as a user runs it, all of its parts, offline: its model is a loopback
    stub instead of the embedded one (whose generation takes minutes on a shared machine)."""
    import os

    from carebench.demo import run_demo
    from stub_server import StubReply, StubServer

    saved = os.environ.get("CAREBENCH_CACHE")
    try:
        with StubServer() as stub:
            stub.handler = lambda req: StubReply(content='{"met": true, "level": 2, "rationale": "a stub"}')
            return run_demo(out=out, model_spec=f"openai:demo@{stub.base_url}", cache_path=cache, jobs=1)
    finally:  # run_demo points CAREBENCH_CACHE at its cache for its parts
        if saved is None:
            os.environ.pop("CAREBENCH_CACHE", None)
        else:
            os.environ["CAREBENCH_CACHE"] = saved


def counting_comparers(reads: list[str]):
    """The suite table's comparers, each noting the name of every run directory it reads in full."""
    from carebench.suites import comparer

    def comparer_of(suite):
        c = comparer(suite)

        class Counting:
            def __getattr__(self, k):
                return getattr(c, k)

            def read(self, run_dir, manifest):
                reads.append(run_dir.name)
                return c.read(run_dir, manifest)

        return Counting()

    return comparer_of

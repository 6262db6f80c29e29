"""Small real runs of every suite (and the demo index), made offline against the loopback
stub, for the tests that look at the rendered reports in a browser."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
for sub in ("", "plural", "construct"):
    p = str(_TESTS / sub) if sub else str(_TESTS)
    if p not in sys.path:
        sys.path.insert(0, p)


def risk_run(root: Path) -> Path:
    from carebench.cli import main
    from risk.test_every_method import answer
    from stub_server import StubServer

    out = root / "risk"
    with StubServer() as stub:
        stub.handler = answer
        assert main(["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                     "--method", "tfidf-lr", "--method", "llm", "--bootstrap", "50", "--out", str(out)]) == 0
    return out


def support_run(root: Path) -> Path:
    from carebench.cli import main
    from carebench.support.tasks import load_tasks
    from stub_server import StubServer
    from support.scripted_stub import Script

    out = root / "support"
    with StubServer() as stub:
        stub.handler = Script(load_tasks("builtin:sample"))
        u = stub.base_url
        assert main(["support", "run", "--responder", f"openai:resp-a@{u}", "--responder", f"openai:resp-b@{u}",
                     *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                     "--attempts", "1", "--limit", "4", "--bootstrap", "50", "--out", str(out)]) == 0
    return out


def plural_run(root: Path, systems: tuple[str, ...] = ("sys-a", "sys-b"), name: str = "plural") -> Path:
    from jury_stub import Scripted, write_release

    from carebench.engine.cache import CompletionCache
    from carebench.engine.options import run_options
    from carebench.plural.commands.run import run_plural
    from carebench.plural.config import PluralRunConfig
    from stub_server import StubServer

    release = write_release(root / f"{name}-release")
    with StubServer() as stub:
        stub.handler = Scripted()
        u = stub.base_url
        cfg = PluralRunConfig(
            release=str(release), systems=[f"openai:{s}@{u}" for s in systems],
            judges=[f"openai:judge-{j}@{u}" for j in "abc"],
            options=run_options(out=root / name, progress=False), sample_size=3, bootstrap=200)
        return run_plural(cfg, cache=CompletionCache(root / f"{name}.sqlite"))


def construct_run(root: Path) -> Path:
    import yaml
    from construct_stub import Pipeline

    from carebench.cli import main
    from stub_server import StubServer

    out = root / "construct"
    with StubServer() as stub:
        stub.handler = Pipeline()
        m = lambda name: f"openai:{name}@{stub.base_url}"
        (root / "literals.txt").write_text("forum_sg\n", "utf-8")
        cfg = {"router": m("router"), "judge": m("judge"),
               "rewriters": [m("good"), m("leaky"), m("badformat"), m("plain")],
               "literals": str(root / "literals.txt"), "embedder": "hashing", "topics": 3}
        (root / "build.yaml").write_text(yaml.safe_dump(cfg), "utf-8")
        assert main(["construct", "build", "--config", str(root / "build.yaml"), "--out", str(out)]) == 0
    return out


def demo_index(root: Path, part: Path) -> Path:
    """A demo run directory holding one suite part (a copy of ``part``), its index
    re-rendered by the demo's own renderer."""
    from carebench.demo import PROBE_ITEMS, rerender
    from carebench.engine.rundir import write_json, write_jsonl, write_manifest

    out = root / "demo"
    out.mkdir()
    shutil.copytree(part, out / part.name)
    write_manifest(out, suite="demo", config={"model": "replay:x", "quick": True}, models=["replay:x"],
                   seeds={}, dataset={"name": "builtin:probe", "items": len(PROBE_ITEMS)})
    write_jsonl(out / "records.jsonl", [
        {"item_id": i, "text": t, "answer": "A reply.", "status": "ok", "latency_s": 0.1, "cached": False,
         "usage": {"prompt_tokens": 1, "completion_tokens": 1}} for i, t in PROBE_ITEMS])
    write_json(out / "metrics.json", {"parts": [part.name], "probe": {}, "timings_s": {}})
    rerender(out)
    return out


def every_run(root: Path) -> dict[str, Path]:
    """Each suite's run (plural twice: two systems and one), and the demo index."""
    runs = {"risk": risk_run(root), "support": support_run(root), "plural": plural_run(root),
            "plural-one": plural_run(root, ("sys-a",), "plural-one"), "construct": construct_run(root)}
    runs["demo"] = demo_index(root, runs["risk"])
    return runs

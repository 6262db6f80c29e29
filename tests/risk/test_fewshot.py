"""Few-shot exemplar selection, pool exclusion and the k sweep (Appendix G), hand-worked."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score

from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.engine.rundir import read_jsonl
from carebench.models import get_model
from carebench.risk.methods import MethodContext, RiskItem, make_method
from carebench.risk.methods.llm import interleave, select_pool
from carebench.risk.sweep import fewshot_sweep
from carebench.types import CarebenchError
from stub_server import StubServer

#: id -> text length; the level is the id's letter (a..d -> 0..3)
LENGTHS = {
    "a1": 10,
    "a2": 30,
    "a3": 20,
    "b1": 25,
    "b2": 15,
    "b3": 15,  # b2/b3 tie on length: id order decides
    "c1": 40,
    "c2": 12,
    "c3": 50,
    "d1": 8,
    "d2": 60,
    "d3": 9,
}
# pool_per_level=2: the two shortest per level, interleaved a, b, c, d, a, b, c, d
POOL_ORDER = ["a1", "b2", "c2", "d1", "a3", "b3", "c1", "d3"]
SCORED = ["a2", "b1", "c3", "d2"]


def corpus() -> list[RiskItem]:
    out = []
    for iid, n in LENGTHS.items():
        text = (iid + " " + "x" * n)[:n] if n > 3 else iid
        out.append(RiskItem(id=iid, text=text, level="abcd".index(iid[0])))
    return out


def item_id_of(post: str) -> str:
    return post.split()[0][:2]


def post_of(content: str) -> str:
    m = re.search(r"<post>\n(.*)\n</post>", content, re.DOTALL)
    assert m, content
    return m.group(1)


@pytest.fixture
def stub():
    with StubServer() as s:
        yield s


def make_ctx(stub, tmp_path, train=None) -> MethodContext:
    run = Run(run_options(cache=tmp_path / "c.sqlite", progress=False, retries=0))
    return MethodContext(
        run=run,
        models={"default": get_model(f"openai:stub-model@{stub.base_url}")},
        train=train,
    )


def chat_bodies(stub) -> list[dict]:
    return [r.body for r in stub.requests if r.path.endswith("/chat/completions")]


def test_pool_is_the_shortest_per_level_interleaved():
    items = corpus()
    pool = select_pool(items, per_level=2)
    assert {lvl: [it.id for it in v] for lvl, v in pool.items()} == {
        0: ["a1", "a3"],
        1: ["b2", "b3"],
        2: ["c2", "c1"],
        3: ["d1", "d3"],
    }
    assert [it.id for it in interleave(pool, 8)] == POOL_ORDER
    assert [it.id for it in interleave(pool, 6)] == POOL_ORDER[:6]
    assert [it.id for it in interleave(pool, 0)] == []
    with pytest.raises(CarebenchError):
        interleave(pool, 9)


def test_exemplars_are_never_scored(stub, tmp_path):
    stub.handler = lambda req: "a"
    items = corpus()
    method = make_method("llm-few-shot", k=4, pool_per_level=2)
    preds = method.predict(items, make_ctx(stub, tmp_path))
    assert [p.item_id for p in preds] == SCORED  # input order, pool items absent
    assert sorted(method.excluded_ids) == sorted(POOL_ORDER)
    assert not {p.item_id for p in preds} & set(POOL_ORDER)
    for p in preds:
        assert sorted(p.detail["pool_ids"]) == sorted(POOL_ORDER)
        assert p.detail["exemplar_ids"] == POOL_ORDER[:4] and p.detail["k"] == 4
    texts = {it.id: it.text for it in items}
    bodies = chat_bodies(stub)
    assert len(bodies) == len(SCORED)
    classified = set()
    for body in bodies:
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 4 + ["user"]
        shots = [post_of(m["content"]) for m in msgs[1:-1:2]]
        assert shots == [texts[i] for i in POOL_ORDER[:4]]
        assert [m["content"] for m in msgs[2:-1:2]] == ["a", "b", "c", "d"]  # gold letters
        target = item_id_of(post_of(msgs[-1]["content"]))
        assert target not in POOL_ORDER
        classified.add(target)
    assert classified == set(SCORED)


def test_zero_shot_arm_shares_llm_cache(stub, tmp_path):
    stub.handler = lambda req: "b"
    items = corpus()
    ctx = make_ctx(stub, tmp_path)
    make_method("llm").predict(items, ctx)
    n = len(chat_bodies(stub))
    preds = make_method("llm-few-shot", k=0, pool_per_level=2).predict(items, ctx)
    assert len(chat_bodies(stub)) == n == len(items)  # every k=0 request was a cache hit
    assert [p.item_id for p in preds] == SCORED and all(p.level == 1 for p in preds)


def test_transfer_pool_comes_from_train_and_every_item_is_scored(stub, tmp_path):
    stub.handler = lambda req: "c"
    evaluated = [RiskItem(id=f"e{j}", text=f"e{j} evaluation post", level=j % 4) for j in range(4)]
    method = make_method("llm-few-shot", k=2, pool_per_level=2)
    preds = method.predict(evaluated, make_ctx(stub, tmp_path, train=corpus()))
    assert [p.item_id for p in preds] == [it.id for it in evaluated]
    assert method.excluded_ids == []
    assert preds[0].detail["exemplar_ids"] == POOL_ORDER[:2]


def test_k_larger_than_pool_is_a_clear_error(stub, tmp_path):
    with pytest.raises(CarebenchError, match="exceeds the exemplar pool"):
        make_method("llm-few-shot", k=9, pool_per_level=2).predict(
            corpus(), make_ctx(stub, tmp_path)
        )


# hand-scripted answers per (k, item): "?" is an unparsable answer
ANSWERS = {
    0: {"a2": "a", "b1": "a", "c3": "a", "d2": "a"},
    2: {"a2": "a", "b1": "b", "c3": "d", "d2": "d"},
    4: {"a2": "a", "b1": "b", "c3": "c", "d2": "?"},
    8: {"a2": "a", "b1": "b", "c3": "c", "d2": "d"},
}


def test_sweep_scores_every_arm_on_the_same_items(stub, tmp_path):
    def handler(req):
        msgs = req.body["messages"]
        k = sum(m["role"] == "assistant" for m in msgs)
        return ANSWERS[k][item_id_of(post_of(msgs[-1]["content"]))]

    stub.handler = handler
    res = fewshot_sweep(
        corpus(), make_ctx(stub, tmp_path), ks=(2, 4, 8), pool_per_level=2, bootstrap=50
    )
    assert [r["k"] for r in res.rows] == [0, 2, 4, 8]
    assert sorted(res.pool_ids) == sorted(POOL_ORDER) and res.scored_ids == SCORED
    gold = np.array([0, 1, 2, 3])
    for row in res.rows:
        k = row["k"]
        assert row["n"] == 4 and row["scored"] == 4
        pred = np.array(
            ["abcd".index(ANSWERS[k][i]) if ANSWERS[k][i] != "?" else 0 for i in SCORED]
        )
        # the failed d2 (gold 3) is scored as the farthest level, 0
        assert row["failures"] == (1 if k == 4 else 0)
        assert row["accuracy"] == pytest.approx(accuracy_score(gold, pred))
        assert row["macro_f1"] == pytest.approx(
            f1_score(gold, pred, labels=[0, 1, 2, 3], average="macro", zero_division=0)
        )
        assert row["qwk"] == pytest.approx(cohen_kappa_score(gold, pred, weights="quadratic"))
        assert row["mae"] == pytest.approx(np.abs(gold - pred).mean())
    assert res.rows[-1]["accuracy"] == 1.0
    for k, preds in res.predictions.items():
        assert not {p.item_id for p in preds} & set(POOL_ORDER)
    assert res.png is not None and res.png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(chat_bodies(stub)) == 4 * 4  # four arms x four scored items, nothing else


def test_sweep_drop_policy_excludes_failures(stub, tmp_path):
    stub.handler = lambda req: "?" if "d2" in req.text else "a"
    res = fewshot_sweep(
        corpus(), make_ctx(stub, tmp_path), ks=(2,), pool_per_level=2, failures="drop", figure=False
    )
    for row in res.rows:
        assert row["failures"] == 1 and row["scored"] == 3
        assert row["accuracy"] == pytest.approx(1 / 3)


def test_sweep_command_writes_a_run_directory(stub, tmp_path):
    import json

    from typer.testing import CliRunner

    from carebench.risk.cli import app

    data = tmp_path / "corpus.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": it.id, "text": it.text, "level": it.level}) + "\n" for it in corpus()
        )
    )
    stub.handler = lambda req: "b"
    args = [
        "sweep",
        "--data",
        str(data),
        "--model",
        f"openai:stub-model@{stub.base_url}",
        "--k",
        "2",
        "--k",
        "4",
        "--pool-per-level",
        "2",
        "--bootstrap",
        "20",
        "--out",
        str(tmp_path / "run"),
        "--cache",
        str(tmp_path / "c.sqlite"),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "run" / "sweep.json").read_text())["rows"]
    assert [r["k"] for r in rows] == [0, 2, 4] and all(r["n"] == 4 for r in rows)
    assert all(r["accuracy"] == pytest.approx(0.25) for r in rows)  # "b" is right for b1 only
    out = tmp_path / "run"
    assert (out / "figures" / "fig4_fewshot_sweep.png").exists() and (out / "report.html").exists()
    # the sweep's run directory (written by run_suite): scored items only, the pool left out
    records = read_jsonl(out / "records.jsonl")
    assert {r["item_id"] for r in records} == set(SCORED)
    assert sorted({r["method"] for r in records}) == ["few-shot k=0", "few-shot k=2", "few-shot k=4"]
    assert "Few-shot scaling" in (out / "report.md").read_text()
    assert len(chat_bodies(stub)) == 3 * 4  # three arms x four scored items, nothing else
    assert len(read_jsonl(out / "calls.jsonl")) == 3 * 4


def test_a_corpus_swallowed_by_the_pool_is_a_clear_error(stub, tmp_path):
    with pytest.raises(CarebenchError, match="exemplar pool"):
        make_method("llm-few-shot", k=2, pool_per_level=3).predict(corpus(), make_ctx(stub, tmp_path))

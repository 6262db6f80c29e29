"""One full name per system: risk runs of one method on two models, or of ``llm`` and
``llm:variant=conservative``, are different systems in compare and leaderboard.

Four real risk runs against the loopback stub answering as two OpenAI-compatible models;
the leaderboard's macro-F1 of each row is checked against scikit-learn recomputed from that
run's own records.jsonl (failed predictions scored as the farthest level, the run's
``wrong`` policy)."""

from __future__ import annotations

import json
import re
import zlib

import pytest
from run_dirs import write_risk_run
from sklearn.metrics import f1_score

from carebench.cli import main
from carebench.system_names import display_names, system_identity
from stub_server import StubServer

LETTERS = "abcd"


def _answer(req) -> str:
    """A deterministic letter per (model, prompt): the two models and the two prompt
    variants answer differently, so the four systems have different scores."""
    body = req.body
    text = body["model"] + json.dumps(body["messages"], sort_keys=True)
    return LETTERS[zlib.crc32(text.encode()) % 4]


def _macro_f1(run_dir) -> float:
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    y = [r["gold"] for r in rows]
    # the run's failure policy 'wrong': a failed prediction is the level farthest from the truth
    p = [r["pred"] if r["pred"] is not None else (3 if r["gold"] < 2 else 0) for r in rows]
    return float(f1_score(y, p, average="macro", labels=[0, 1, 2, 3], zero_division=0))


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    runs = {}
    with StubServer() as stub:
        stub.handler = _answer
        for key, method, model in (("m1", "llm", "model-one"), ("m2", "llm", "model-two"),
                                   ("cons", "llm:variant=conservative", "model-one")):
            out = tmp / key
            assert main(["risk", "run", "--data", "builtin:sample", "--method", method, "--model",
                         f"openai:{model}@{stub.base_url}", "--bootstrap", "200", "--out", str(out),
                         "--cache", str(tmp / "c.sqlite")]) == 0
            runs[key] = (out, method, f"openai:{model}@{stub.base_url}")
    return tmp, runs


def test_four_llm_systems_make_one_leaderboard_of_four_rows(four_runs, capsys):
    tmp, runs = four_runs
    # the fourth run: the conservative variant on model-two (another stub, so another spec)
    dirs = [runs[k][0] for k in ("m1", "m2", "cons")]
    with StubServer() as stub:
        stub.handler = _answer
        out = tmp / "cons2"
        assert main(["risk", "run", "--data", "builtin:sample", "--method", "llm:variant=conservative",
                     "--model", f"openai:model-two@{stub.base_url}", "--bootstrap", "200", "--out", str(out),
                     ]) == 0
    dirs.append(out)
    capsys.readouterr()
    assert main(["leaderboard", *map(str, dirs), "--out", str(tmp / "lb"), "--bootstrap", "200"]) == 0
    m = json.loads((tmp / "lb" / "metrics.json").read_text())
    board = next(b for b in m["boards"] if b["metric"] == "macro_f1")
    assert len(board["rows"]) == 4 and not m["duplicates"]
    by_run = {r["run"]: r for r in board["rows"]}
    for d in dirs:
        assert by_run[str(d)]["value"] == pytest.approx(_macro_f1(d))
    names = [r["system"] for r in board["rows"]]
    assert len(set(names)) == 4
    assert sum("variant=conservative" in n for n in names) == 2
    assert sum("model-two" in n for n in names) == 2


def test_compare_pair_labels_carry_the_variant(four_runs, capsys):
    tmp, runs = four_runs
    (a, _, spec), (b, _, _) = runs["m1"], runs["cons"]
    assert main(["compare", str(a), str(b), "--out", str(tmp / "cmp"), "--bootstrap", "200"]) in (0, 1)
    m = json.loads((tmp / "cmp" / "metrics.json").read_text())
    assert [(p["base"], p["candidate"]) for p in m["pairs"]] == [(f"llm@{spec}", f"llm:variant=conservative@{spec}")]
    rows = {r["metric"]: r for r in m["pairs"][0]["rows"]}
    assert rows["macro_f1"]["base"] == pytest.approx(_macro_f1(a))
    assert rows["macro_f1"]["candidate"] == pytest.approx(_macro_f1(b))


def test_identity_and_display_names_by_hand():
    assert system_identity("llm") == "llm"
    assert system_identity("llm", {"variant": "conservative"}, "openai:m", {"temperature": 0}) \
        == "llm:variant=conservative@openai:m {temperature=0}"
    ids = {"tfidf-lr": "tfidf-lr", "llm@a": "llm@openai:a", "llm@b": "llm@openai:b"}
    shown = display_names(ids, {"tfidf-lr": "tfidf-lr", "llm@a": "llm", "llm@b": "llm"})
    assert shown == {"tfidf-lr": "tfidf-lr", "llm@a": "llm@openai:a", "llm@b": "llm@openai:b"}
    # two identical identities stay apart through the run's own key
    same = display_names({"x": "llm", "y": "llm"}, {"x": "llm", "y": "llm"})
    assert len(set(same.values())) == 2


def test_a_run_written_before_the_names_re_renders_with_its_method_names(tmp_path, capsys):
    gold = {f"i{k:02d}": k % 4 for k in range(24)}
    run = write_risk_run(tmp_path / "old", gold, {"llm": dict(gold), "tfidf-lr": {i: 0 for i in gold}})
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["methods"]  # older runs did not list their methods
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    table2 = md[md.index("## Main results"): md.index("## Bootstrap")]
    rows = re.findall(r"^\| ([^|]+) \|", table2, re.MULTILINE)
    assert [r.strip() for r in rows[3:]] == ["llm", "tfidf-lr"]


def test_a_method_without_model_calls_names_no_model(tmp_path, capsys):
    """tfidf-lr beside an llm run with --model: the model belongs to llm's name only."""
    with StubServer() as stub:
        stub.handler = _answer
        spec = f"openai:model-one@{stub.base_url}"
        out = tmp_path / "mixed"
        assert main(["risk", "run", "--data", "builtin:sample", "--method", "tfidf-lr", "--method", "llm",
                     "--model", spec, "--bootstrap", "200", "--out", str(out), "--no-cache"]) == 0
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "lb"), "--bootstrap", "200"]) == 0
    board = next(b for b in json.loads((tmp_path / "lb" / "metrics.json").read_text())["boards"]
                 if b["metric"] == "macro_f1")
    names = sorted(r["system"] for r in board["rows"])
    assert names == sorted(["tfidf-lr", f"llm@{spec}"]), names

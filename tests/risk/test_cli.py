"""`carebench risk run` end to end on the built-in corpus; re-rendering from records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sklearn.metrics as skm
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from carebench.suites import rerender

FITTED = ["tfidf-lr", "tfidf-ordinal", "moderation-fixed", "moderation-calibrated"]


def _invoke(args: list[str]):
    res = CliRunner().invoke(app, args, catch_exceptions=True)
    return res


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("risk") / "run"
    args = ["run", "--data", "builtin:sample", "--out", str(out),
            "--cache", str(out.parent / "c.db")]
    for m in FITTED:
        args += ["--method", m]
    res = _invoke(args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "48 items" in res.output
    return out


def test_run_writes_every_artifact(run_dir):
    for f in ("manifest.json", "records.jsonl", "calls.jsonl", "metrics.json", "report.md",
              "report.html"):
        assert (run_dir / f).is_file(), f
    figs = {p.name for p in (run_dir / "figures").iterdir()}
    assert "fig1_per_class_f1.png" in figs
    assert {f"fig3_confusion_{m}.png" for m in FITTED} <= figs
    records = read_jsonl(run_dir / "records.jsonl")
    assert len(records) == 48 * len(FITTED)
    for r in records:
        assert {"item_id", "method", "gold", "pred", "status"} <= set(r)
        assert r["status"] == "ok" and 0 <= r["pred"] <= 3 and 0 <= r["gold"] <= 3
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert list(metrics["methods"]) == FITTED
    assert metrics["n"] == 48 and metrics["label_counts"]["Ideation"] == 12
    # the numbers are those of the records, recomputed here with scikit-learn
    for m in FITTED:
        y = np.array([r["gold"] for r in records if r["method"] == m])
        p = np.array([r["pred"] for r in records if r["method"] == m])
        e = metrics["methods"][m]
        assert e["accuracy"]["value"] == pytest.approx(skm.accuracy_score(y, p), abs=1e-12)
        assert e["macro_f1"]["value"] == pytest.approx(
            skm.f1_score(y, p, average="macro", zero_division=0), abs=1e-12)
        assert e["weighted_f1"]["value"] == pytest.approx(
            skm.f1_score(y, p, average="weighted", zero_division=0), abs=1e-12)
        assert e["qwk"]["value"] == pytest.approx(
            skm.cohen_kappa_score(y, p, labels=range(4), weights="quadratic"), abs=1e-12)
        assert e["mae"]["value"] == pytest.approx(skm.mean_absolute_error(y, p), abs=1e-12)
        assert e["high_risk_f1"]["value"] == pytest.approx(
            skm.f1_score(y >= 2, p >= 2, zero_division=0), abs=1e-12)
        assert e["confusion"] == skm.confusion_matrix(y, p, labels=range(4)).tolist()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["suite"] == "risk" and manifest["dataset"]["illustrative"] is True
    md = (run_dir / "report.md").read_text()
    for heading in ("Table 2", "Table 3", "Table 4", "Figure 1", "Figure 3", "Chance",
                    "Under- and over-triage", "Paired comparisons", "Illustrative data"):
        assert heading in md, heading


def test_rerender_reproduces_metrics_exactly(run_dir):
    before = (run_dir / "metrics.json").read_bytes()
    (run_dir / "metrics.json").unlink()
    (run_dir / "report.md").unlink()
    (run_dir / "report.html").unlink()
    rerender(run_dir)
    assert (run_dir / "metrics.json").read_bytes() == before
    assert (run_dir / "report.html").is_file() and (run_dir / "report.md").is_file()


def test_report_escapes_dataset_text(tmp_path):
    data = tmp_path / "d.jsonl"
    rows = [{"id": f"<b>x{i}</b>", "text": f"<script>alert({i})</script> words {i % 4}",
             "level": i % 4, "self_harm": (i % 4) / 4 + 0.05, "self_harm_intent": 0.1,
             "self_harm_instructions": 0.0} for i in range(16)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = _invoke(["run", "--data", str(data), "--method", "moderation-fixed",
                   "--out", str(tmp_path / "r"), "--bootstrap", "100"])
    assert res.exit_code == 0, repr(res.exception)
    html = (tmp_path / "r" / "report.html").read_text()
    assert "<b>x1</b>" not in html and "&lt;b&gt;x1&lt;/b&gt;" in html


def test_config_file_and_cli_override(tmp_path):
    cfg = tmp_path / "risk.yaml"
    cfg.write_text(
        "data: builtin:sample\nseed: 7\nbootstrap: 100\n"
        "methods:\n  - moderation-fixed\n  - method: moderation-weighted\n"
        "    label: weighted-manual\n    options: {thresholds: [0.1, 0.3, 0.5]}\n"
    )
    out = tmp_path / "r"
    res = _invoke(["run", "--config", str(cfg), "--out", str(out), "--seed", "11"])
    assert res.exit_code == 0, repr(res.exception)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["seed"] == 11 and manifest["config"]["bootstrap"] == 100
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["methods"]) == ["moderation-fixed", "weighted-manual"]
    rec = [r for r in read_jsonl(out / "records.jsonl") if r["method"] == "weighted-manual"]
    assert rec[0]["detail"]["thresholds"] == [0.1, 0.3, 0.5]
    toml = tmp_path / "risk.toml"
    toml.write_text('data = "builtin:sample"\nbogus = 1\nmethods = ["tfidf-lr"]\n')
    res = _invoke(["run", "--config", str(toml), "--out", str(tmp_path / "r2")])
    assert "unknown setting(s) bogus" in str(res.exception)


def test_dry_run_plans_moderation_calls_without_calling(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": f"t{i}", "level": i % 4}) + "\n"
                            for i in range(8)))
    res = _invoke(["run", "--data", str(data), "--method", "moderation-fixed",
                   "--moderation-model", "openai-moderation:omni-moderation-latest@http://127.0.0.1:9/v1",
                   "--dry-run", "--json", "--out", str(tmp_path / "r"), "--cache", str(tmp_path / "c.db")])
    assert res.exit_code == 0, repr(res.exception)
    plan = json.loads(res.output)
    assert (plan["calls"], plan["cached"], plan["to_make"]) == (8, 0, 8)
    assert plan["stages"][0]["name"] == "moderation-fixed"
    assert not (tmp_path / "r").exists()


def test_failed_moderation_calls_are_counted_and_scored_wrong(tmp_path):
    from stub_server import StubReply, StubServer

    data = tmp_path / "d.jsonl"
    rows = [{"id": f"i{i}", "text": f"post {i} {'bad' if i in (1, 6) else 'fine'}", "level": i % 4}
            for i in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with StubServer() as stub:
        stub.on_text("fine", StubReply(moderation={"self-harm": 0.5, "self-harm/intent": 0.2}))
        stub.on_text("bad", StubReply(status=400))
        spec = f"openai-moderation:omni-moderation-latest@{stub.base_url}"
        outs = {}
        for policy in ("wrong", "drop"):
            out = tmp_path / policy
            res = _invoke(["run", "--data", str(data), "--method", "moderation-fixed",
                           "--moderation-model", spec, "--failures", policy, "--out", str(out),
                           "--cache", str(tmp_path / "c.db"), "--bootstrap", "100"])
            assert res.exit_code == 0, repr(res.exception)
            outs[policy] = json.loads((out / "metrics.json").read_text())["methods"]["moderation-fixed"]
    # level 2 for every answered item (max 0.5 in [0.35, 0.70)); items 1 and 6 failed
    wrong, drop = outs["wrong"], outs["drop"]
    assert wrong["failures"] == drop["failures"] == 2
    assert wrong["n_scored"] == 8 and drop["n_scored"] == 6
    # wrong: i1 (gold 1) -> 3, i6 (gold 2) -> 0; correct only the gold-2 item i2
    assert wrong["accuracy"]["value"] == pytest.approx(1 / 8)
    # drop: golds 0,3,0,1,3,3 ... of the 6 answered items (i0,i2,i3,i4,i5,i7) one is gold 2
    assert drop["accuracy"]["value"] == pytest.approx(1 / 6)
    assert wrong["confusion"][1][3] == 1 and wrong["confusion"][2][0] == 1


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    from carebench.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x", "level": 9}\n')
    rc = main(["risk", "run", "--data", str(bad), "--method", "tfidf-lr", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "bad.jsonl: line 1: field 'level'" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_demo_runs_offline_with_a_stub_model(tmp_path, monkeypatch):
    from carebench.risk import demo
    from carebench.risk.methods import REGISTRY
    from stub_server import StubServer

    if "llm" not in REGISTRY:
        pytest.skip("prompted-LLM methods not present")
    real = demo.demo_methods
    monkeypatch.setattr(demo, "demo_methods", lambda spec, quick=True: (
        [s for s in real(spec, quick)[0] if s.method != "embed-lr"], real(spec, quick)[1]))
    with StubServer() as stub:
        stub.handler = lambda req: "c"
        out = demo.run_demo(tmp_path / "risk", model_spec=f"openai:stub-model@{stub.base_url}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"tfidf-lr", "tfidf-ordinal", "moderation-fixed", "llm"} <= set(metrics["methods"])
    llm = metrics["methods"]["llm"]
    # the quick demo: 3 posts per level, every one answered "c", 3-fold cross-validation;
    # severity on those 12 only, the 6 negative items scored for detection
    assert llm["failures"] == 0
    assert llm["confusion"] == [[0, 0, 3, 0]] * 4 and demo.QUICK_PER_LEVEL == 3
    assert metrics["n"] == 12 and metrics["n_negative"] == demo.QUICK_NEGATIVES == 6
    assert metrics["methods"]["tfidf-lr"]["n_folds"] == 3
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    llm_calls = [c for c in calls if c["tag"][0] == "llm"]
    assert len(llm_calls) == 12 + 6  # one call per post, negatives included
    # every item answered "c" (Behavior): the llm flags all, so sensitivity 1, specificity 0
    det = metrics["deployment"]["methods"]["llm"]["detection"]
    assert det["sensitivity"]["value"] == 1.0 and det["specificity"]["value"] == 0.0
    assert det["auroc"]["value"] == 0.5  # one tied score for every item
    report = (out / "report.md").read_text()
    assert "## Detection (suicide-related vs negative)" in report and "Illustrative data" in report
    assert (out / "figures" / "fig_alert_budget.png").is_file()
    # the quick demo constrains the answer to the four letters (decoding=json)
    assert all(c["request"]["structured"]["labels"] == ["a", "b", "c", "d"] for c in llm_calls)


def test_transfer_fits_on_train_corpus(tmp_path):
    from carebench.risk.data import load_dataset
    from carebench.risk.methods import moderation as mod

    data = tmp_path / "d.jsonl"
    rows = [{"id": f"e{i}", "text": f"evaluation text {i}", "level": i % 4,
             "self_harm": 0.2 * (i % 4) + 0.05, "self_harm_intent": 0.1,
             "self_harm_instructions": 0.0} for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r"
    res = _invoke(["run", "--data", str(data), "--train", "builtin:sample", "--method", "tfidf-lr",
                   "--method", "moderation-calibrated", "--out", str(out), "--bootstrap", "100"])
    assert res.exit_code == 0, repr(res.exception)
    recs = read_jsonl(out / "records.jsonl")
    assert len(recs) == 24
    assert all(r["detail"]["fold"] == -1 and r["detail"]["n_train"] == 48
               for r in recs if r["method"] == "tfidf-lr")
    # independent of the fitting code: the weighted signal (0.50/0.35/0.15) by hand, the
    # cuts applied by hand, macro-F1 by scikit-learn
    def signal(s):
        return 0.50 * s["self_harm"] + 0.35 * s["self_harm_intent"] + 0.15 * s["self_harm_instructions"]

    def levels(sig, th):
        return [sum(x >= t for t in th) for x in sig]

    cal = [r for r in recs if r["method"] == "moderation-calibrated"]
    th = cal[0]["detail"]["thresholds"]
    assert all(r["detail"]["thresholds"] == th for r in cal) and th == sorted(th)
    train = load_dataset("builtin:sample").items
    tr_sig, tr_y = [signal(it.scores) for it in train], [it.level for it in train]
    fitted = skm.f1_score(tr_y, levels(tr_sig, th), average="macro")
    fixed = skm.f1_score(tr_y, levels(tr_sig, mod.FIXED_THRESHOLDS), average="macro")
    assert fitted >= fixed and fitted > 0.5  # fitted to the training labels
    assert [r["pred"] for r in cal] == levels([signal(r) for r in rows], th)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["train_dataset"]["source"] == "builtin:sample"


def test_method_arguments_and_model_expansion():
    from carebench.risk.config_file import method_specs
    from carebench.risk.methods import REGISTRY

    specs = method_specs(["embed-lr:encoder=/m/x,C=0.5", "tfidf-lr"], None, "--method")
    assert specs[0].method == "embed-lr" and specs[0].options == {"encoder": "/m/x", "C": 0.5}
    if "llm" in REGISTRY:
        specs = method_specs([{"method": "llm"}, "tfidf-lr", {"method": "llm-cot", "model": "x:y"}],
                             ["openai:a", "openai:b"], "cfg")
        assert [(s.method, s.model) for s in specs] == [
            ("llm", "openai:a"), ("llm", "openai:b"), ("tfidf-lr", None), ("llm-cot", "x:y")]


def test_repeated_methods_get_distinct_labels():
    from carebench.risk.config import MethodSpec, resolve_labels
    from carebench.types import CarebenchError

    names = [s.name for s in resolve_labels(
        [MethodSpec("tfidf-ordinal"), MethodSpec("tfidf-ordinal", options={"decision": "argmax"}),
         MethodSpec("llm", model="p:a"), MethodSpec("llm", model="p:b")], None)]
    assert names == ["tfidf-ordinal", "tfidf-ordinal[decision=argmax]", "llm@p:a", "llm@p:b"]
    with pytest.raises(CarebenchError, match="unique"):
        resolve_labels([MethodSpec("tfidf-lr"), MethodSpec("tfidf-lr")], None)


def test_limit_keeps_the_first_items_and_help_shows_every_default(tmp_path, capsys):
    """`risk run --limit N` plans calls for the first N items of the file only; the help shows
    the effective defaults of options declared None (for config overlays)."""
    import json as _json

    from carebench.cli import main as cli_main

    assert cli_main(["risk", "run", "--data", "builtin:sample", "--method", "llm", "--model",
                     "openai:x@http://127.0.0.1:9/v1", "--limit", "7", "--dry-run", "--json"]) == 0
    plan = _json.loads(capsys.readouterr().out)
    assert plan["calls"] == 7
    assert cli_main(["risk", "run", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    # Click renders a show_default text in parentheses; a --config file's value wins when the flag is left out
    for value in ("42", "2000", "wrong", "0.2", "every item"):
        shown = f"[default: ({value}, or the --config file's)"  # then "]", or "; x>=1]" for a range
        assert shown + "]" in help_text or shown + "; x>=1]" in help_text, shown
    assert "bootstraps ." not in help_text and "resamples ." not in help_text
    assert "\\[" not in help_text  # no markup escape leaks into plain help

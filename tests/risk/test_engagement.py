"""Engagement rates of an LLM method's own replies, recounted from records.jsonl.

A `risk run` of ``llm`` against the loopback stub whose answers are valid letters, text
refusals, blank replies, provider refusals and a non-letter reply that is not a refusal.
The shares in metrics.json are recounted with pandas from the records (the test lists
which scripted answers are refusals; it does not call the pre-filter), their intervals
equal a separate numpy resampling loop, and the seed's metrics are those of the failure
policy recomputed with sklearn (failures scored at the level farthest from gold).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn.metrics as skm
from typer.testing import CliRunner

from carebench.risk.cli import app
from stub_server import StubReply, StubServer

B, SEED = 300, 7
#: the scripted answers, chosen per post by a hash of the request text
ANSWERS = ["b", "I can't help with that.", "", "d", "FILTERED", "I'd rather think about it more.",
           "a", "I cannot assist with this request."]
#: the scripted answers a reader calls refusals (text ones; FILTERED is the provider's refusal)
TEXT_REFUSALS = {"I can't help with that.", "I cannot assist with this request."}


def _reply(req) -> StubReply:
    answer = ANSWERS[zlib.crc32(req.text.encode()) % len(ANSWERS)]
    if answer == "FILTERED":
        return StubReply(content="", finish_reason="content_filter")
    return StubReply(content=answer)


def _run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    with StubServer(_reply) as stub:
        res = CliRunner().invoke(app, [
            "run", "--data", "builtin:sample", "--method", "llm", "--model", f"openai:stub-model@{stub.base_url}",
            "--concurrency", "1", "--out", str(out), "--cache", str(tmp_path / "c.db"),
            "--bootstrap", str(B), "--seed", str(SEED)], catch_exceptions=True)
    assert res.exit_code == 0, res.output + repr(res.exception)
    return out


def _expected_class(row: pd.Series) -> str:
    if row["status"] == "content_filter":
        return "refusal"
    if not str(row["raw"] or "").strip():
        return "empty"
    return "refusal" if row["raw"] in TEXT_REFUSALS else "engaged"


def test_llm_engagement_shares_intervals_and_unchanged_metrics(tmp_path):
    out = _run(tmp_path)
    df = pd.read_json(out / "records.jsonl", lines=True)
    metrics = json.loads((out / "metrics.json").read_text())
    m = metrics["methods"]["llm"]
    assert (df["status"] != "harness_failure").all()
    df["cls"] = df.apply(_expected_class, axis=1)
    # every kind of scripted answer occurred, so each class is exercised
    assert set(df["cls"]) == {"empty", "refusal", "engaged"}
    assert (df["status"] == "content_filter").sum() > 0 and df["raw"].isin(TEXT_REFUSALS).sum() > 0

    e = m["engagement"]
    assert e["n"] == len(df)
    for k in ("empty", "refusal", "engaged"):
        assert e["counts"][k] == int((df["cls"] == k).sum())
        assert e["shares"][k]["value"] == (df["cls"] == k).mean()

    # which rule decided each: the provider's refusals, blank replies, the English phrase list
    assert e["sources"] == {"provider": int((df["status"] == "content_filter").sum()),
                            "blank": int(((df["status"] != "content_filter") & (df["cls"] == "empty")).sum()),
                            "phrase:en": int(df["raw"].isin(TEXT_REFUSALS).sum()),
                            "no rule": int((df["cls"] == "engaged").sum())}

    # a separate resampling loop: items in record order, the run's seed and B
    X = np.stack([(df["cls"] == k).to_numpy(float) for k in ("empty", "refusal", "engaged")], axis=1)
    n = len(X)
    draws = np.random.default_rng(SEED).integers(0, n, (B, n))
    samples = np.array([X[d].mean(axis=0) for d in draws])
    for j, k in enumerate(("empty", "refusal", "engaged")):
        lo, hi = np.percentile(samples[:, j], [2.5, 97.5])
        assert e["shares"][k]["ci"] == [lo, hi] or np.allclose(e["shares"][k]["ci"], [lo, hi], rtol=1e-12)
        assert lo < e["shares"][k]["value"] < hi

    # the seed's metrics: failures (refusals, blanks, parse failures) scored at the farthest level
    gold = df["gold"].astype(int).to_numpy()
    ok = (df["status"] == "ok") & df["pred"].notna()
    pred = np.where(ok, df["pred"].fillna(-1).astype(int), np.where(gold <= 1, 3, 0))
    assert m["failures"] == int((~ok).sum()) == int((df["cls"] != "engaged").sum()) + int(
        (df["raw"] == "I'd rather think about it more.").sum())
    assert m["accuracy"]["value"] == skm.accuracy_score(gold, pred)
    assert np.isclose(m["macro_f1"]["value"], skm.f1_score(gold, pred, average="macro", labels=[0, 1, 2, 3],
                                                           zero_division=0), rtol=0, atol=1e-12)
    assert np.isclose(m["qwk"]["value"], skm.cohen_kappa_score(gold, pred, weights="quadratic"), atol=1e-12)

    html = (out / "report.html").read_text()
    assert "Refusal share" in html and "deflections are not detected" in html
    refusals = e["counts"]["refusal"]
    assert f'<td class="right">{refusals}</td><td class="right">{e["shares"]["refusal"]["value"]:.3f} [' in html


def test_methods_without_a_reply_have_no_engagement(tmp_path):
    out = tmp_path / "fit"
    res = CliRunner().invoke(app, ["run", "--data", "builtin:sample", "--method", "tfidf-lr", "--out", str(out),
                                   "--bootstrap", "50"], catch_exceptions=True)
    assert res.exit_code == 0, res.output + repr(res.exception)
    m = json.loads((out / "metrics.json").read_text())["methods"]["tfidf-lr"]
    assert m["status"] == "complete" and "engagement" not in m

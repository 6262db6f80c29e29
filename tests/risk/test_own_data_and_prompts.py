"""Bring your own data and prompts (issue 10, item 10)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from carebench.risk.data import load_dataset
from carebench.types import CarebenchError
from stub_server import StubServer


def _csv(tmp_path, header, rows):
    p = tmp_path / "mine.csv"
    p.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return p


def test_columns_map_a_users_csv_and_ids_default_to_row_numbers(tmp_path):
    p = _csv(tmp_path, "post,label", ['"I keep thinking it would be easier to not exist",IDEATION',
                                      "checking on a friend,indicator", "I bought the pills,Behavior",
                                      '"I took them, I am in hospital",attempt'])
    with pytest.raises(CarebenchError, match="field 'text'"):
        load_dataset(p)
    ds = load_dataset(p, columns="text=post,level=label")
    assert [(it.id, it.level) for it in ds.items] == [("1", 1), ("2", 0), ("3", 2), ("4", 3)]
    assert ds.items[3].text == "I took them, I am in hospital"
    assert ds.describe()["columns"] == {"text": "post", "level": "label"}
    with_id = _csv(tmp_path, "case,post,label,user", ["c9,a,0,u1", "c7,b,3,u1"])
    ds = load_dataset(with_id, columns={"id": "case", "text": "post", "level": "label",
                                        "group": "user"})
    assert [(it.id, it.group) for it in ds.items] == [("c9", "u1"), ("c7", "u1")]
    with pytest.raises(CarebenchError, match="no column 'body'"):
        load_dataset(p, columns="text=body,level=label")
    with pytest.raises(CarebenchError, match="unknown field 'txt'"):
        load_dataset(p, columns="txt=post")


def test_columns_from_the_cli_and_a_config_file(tmp_path):
    p = _csv(tmp_path, "post,label", [f"post {i} words,{['a', 'b', 'c', 'd'][i % 4]}"
                                      for i in range(16)])
    res = CliRunner().invoke(app, ["run", "--data", str(p), "--columns", "text=post,level=label",
                                   "--method", "tfidf-lr", "--out", str(tmp_path / "r"),
                                   "--bootstrap", "20"])
    assert res.exit_code == 0, repr(res.exception)
    assert len(read_jsonl(tmp_path / "r" / "records.jsonl")) == 16
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"data: {p}\ncolumns: {{text: post, level: label}}\nmethods: [tfidf-lr]\n"
                   "bootstrap: 20\n")
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--out", str(tmp_path / "r2")])
    assert res.exit_code == 0, repr(res.exception)


def test_prompts_dir_replaces_package_prompts_and_is_hashed(tmp_path):
    mine = tmp_path / "prompts"
    mine.mkdir()
    (mine / "rubric.txt").write_text("MY CLINICIAN RUBRIC: rate the post a, b, c or d.\n")
    seen = []
    with StubServer() as stub:
        stub.handler = lambda req: (seen.append(req.body["messages"][0]["content"]), "b")[1]
        common = ["run", "--data", "builtin:sample", "--method", "llm", "--bootstrap", "20",
                  "--model", f"openai:stub@{stub.base_url}", "--no-cache"]
        res = CliRunner().invoke(app, [*common, "--prompts", str(mine), "--out", str(tmp_path / "a")])
        assert res.exit_code == 0, repr(res.exception)
        res = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "b")])
        assert res.exit_code == 0, repr(res.exception)
    assert seen[0].startswith("MY CLINICIAN RUBRIC") and not seen[-1].startswith("MY CLINICIAN")
    ours = json.loads((tmp_path / "a" / "manifest.json").read_text())["prompts"]
    package = json.loads((tmp_path / "b" / "manifest.json").read_text())["prompts"]
    assert ours["replaced"] == ["rubric"] and package["replaced"] == []
    assert ours["sha256"] != package["sha256"] and len(ours["sha256"]) == 64
    assert ours["sha256"][:16] in (tmp_path / "a" / "report.md").read_text()
    (mine / "post.txt").write_text("no placeholder here\n")
    res = CliRunner().invoke(app, ["run", "--data", "builtin:sample", "--method", "tfidf-lr",
                                   "--prompts", str(mine), "--out", str(tmp_path / "c")])
    assert "must use the placeholders ['post']" in str(res.exception)
    (mine / "post.txt").unlink()
    (mine / "rubrik.txt").write_text("x\n")
    res = CliRunner().invoke(app, ["run", "--data", "builtin:sample", "--method", "tfidf-lr",
                                   "--prompts", str(mine), "--out", str(tmp_path / "c")])
    assert "rubrik.txt replaces no template" in str(res.exception)

"""The console: help when given nothing, --version, built-in names in help, exclusions that name
both values and the override, reports pointed to as report.html, results on stdout."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from importlib import metadata, resources

from run_dirs import write_risk_run

from carebench.cli import main

GOLD = {f"i{k}": k % 4 for k in range(12)}


def test_bare_carebench_and_a_bare_group_print_their_help_and_exit_0(capsys):
    from carebench.suites import SUITES

    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Usage: carebench [OPTIONS] COMMAND") and err == ""
    for name in (*SUITES, "compare", "leaderboard", "view", "report", "demo"):
        assert re.search(rf"^\s+{name}\s", out, re.MULTILINE), name
    assert main(["risk"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Usage: carebench risk [OPTIONS] COMMAND") and " run " in out and err == ""


def test_a_command_missing_its_arguments_shows_its_help_and_exits_2(capsys):
    assert main(["compare"]) == 2  # a CI step with empty variables must not pass
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("Usage: carebench compare [OPTIONS]") and "--allow-different" in err


def test_version_names_carebench_and_the_llama_cpp_runtime(capsys, monkeypatch):
    import importlib.util

    import carebench

    assert main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"carebench {carebench.__version__}"
    if importlib.util.find_spec("llama_cpp") is not None:
        assert lines[1] == f"llama.cpp runtime: llama-cpp-python {metadata.version('llama-cpp-python')}"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llama_cpp" else real(n, *a))
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("llama.cpp runtime: not installed")


def _help(capsys, *args):
    assert main([*args, "--help"]) == 0
    # rich wraps long words at their hyphens ("builtin:sample-" / "with-negatives"): join those back
    return re.sub(r"- (?=\S)", "-", " ".join(capsys.readouterr().out.split()))


def test_help_names_the_built_in_rubrics_and_data_sets(capsys):
    from carebench.converse.rubric import load_rubric

    text = _help(capsys, "converse", "run")
    files = [p.name for p in resources.files("carebench.converse.data").iterdir()
             if p.name.startswith("rubric_") and p.name.endswith(".yaml")]
    assert len(files) >= 2
    for f in files:
        name = "builtin:" + f.removeprefix("rubric_").removesuffix(".yaml")
        assert name in text, name
        assert load_rubric(name) is not None  # the name in help is one the loader takes
    for suite, folder in (("risk", "risk"), ("support", "support")):
        text = _help(capsys, suite, "run")
        shipped = [p.name.removesuffix(".jsonl") for p in (resources.files("carebench") / "data" / folder).iterdir()
                   if p.name.endswith(".jsonl")]
        assert shipped and all(f"builtin:{n}" in text for n in shipped), (suite, shipped)


class _Subtitle(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.subtitle, self._in = None, False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self._in = tag == "p" and ("class", "subtitle") in attrs

    def handle_data(self, data):
        if self._in and self.subtitle is None:
            self.subtitle = data


def test_leaderboard_exclusion_names_both_values_and_the_flag(tmp_path, capsys):
    preds = {m: {i: (v + k) % 4 for i, v in GOLD.items()} for k, m in enumerate(("m-a", "m-b"))}
    a = write_risk_run(tmp_path / "a", GOLD, {"m-a": preds["m-a"]})
    b = write_risk_run(tmp_path / "b", GOLD, {"m-b": preds["m-b"]})
    c = write_risk_run(tmp_path / "c", GOLD, {"m-c": preds["m-a"]},
                       extra={"config": {"failures": "wrong", "bootstrap": 300, "seed": 42, "max_failure_share": 0.2}})
    capsys.readouterr()
    out_dir = tmp_path / "lb"
    assert main(["leaderboard", str(a), str(b), str(c), "--out", str(out_dir), "--bootstrap", "100"]) == 0
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"leaderboard of 2 run(s) in {out_dir}/report.html; 1 excluded"
    assert lines[1].startswith(f"  excluded {c}: differs in scoring.bootstrap: ")
    assert '"B": 200' in lines[1] and '"B": 300' in lines[1]
    assert lines[1].endswith("(include it on purpose: --allow-different scoring.bootstrap)")
    m = json.loads((out_dir / "metrics.json").read_text())
    assert [r["included"] for r in m["runs"]] == [True, True, False]
    html = (out_dir / "report.html").read_text()
    assert _Subtitle(html).subtitle == "2 run(s) merged; 1 excluded (see Runs)"
    assert "--allow-different scoring.bootstrap" in html


def test_compare_refusal_names_both_values_and_the_flag_and_points_to_report_html(tmp_path, capsys):
    a = write_risk_run(tmp_path / "a", GOLD, {"m": {i: v for i, v in GOLD.items()}})
    c = write_risk_run(tmp_path / "c", GOLD, {"m": {i: v for i, v in GOLD.items()}},
                       extra={"config": {"failures": "drop", "bootstrap": 200, "seed": 42, "max_failure_share": 0.2}})
    capsys.readouterr()
    assert main(["compare", str(a), str(c), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "add --allow-different scoring.failures" in err
    assert 'scoring.failures: base "wrong", candidate "drop"' in err
    assert main(["compare", str(a), str(c), "--out", str(tmp_path / "x"), "--allow-different", "scoring.failures",
                 "--bootstrap", "100"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[0].endswith(f"report in {tmp_path / 'x'}/report.html")
    assert (tmp_path / "x" / "report.html").is_file()

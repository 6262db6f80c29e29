"""CLI: user errors are one clear line with a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from carebench.cli import main
from stub_server import StubReply, StubServer


def cb(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "carebench", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["models", "check", "foo:bar"], "unknown model provider 'foo'"),
        (["models", "check", "gpt-4o"], "malformed model spec"),
        (["models", "check", "openai:gpt-4o"], "OPENAI_API_KEY is not set"),
        (["models", "check", "openai:m@http://127.0.0.1:9/v1", "--timeout", "2"], "cannot reach"),
        (["models", "check", "llamacpp:/nonexistent/model.gguf"], "not found"),
        (["models", "check", "replay:/nonexistent/run"], "replay recording not found"),
        (["report", "/nonexistent/run"], "not found"),
    ],
)
def test_user_errors_are_one_line(args, message):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    p = cb(*args, env=env)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("carebench: error:") and message in lines[0], p.stderr


def test_models_check_prints_ok_latency_answer():
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content="ready", delay=0.01)
        p = cb("models", "check", f"openai:stub@{stub.base_url}")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok ") and "latency" in p.stdout and "'ready'" in p.stdout


# -- usage errors: the usage line and one error line, exit 2, for every command --------


def _command_paths() -> list[list[str]]:
    """Every command and group of the ``carebench`` tree (what ``--help`` lists)."""
    import typer.main

    from carebench import cli

    cli._mount_suites()
    root = typer.main.get_command(cli.app)
    out: list[list[str]] = []

    def walk(cmd, path):
        out.append(path)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(root, [])
    return out


def _commands() -> list[tuple[list[str], object]]:
    """(path, click command) for every command and group of the tree."""
    import typer.main

    from carebench import cli

    cli._mount_suites()
    out: list[tuple[list[str], object]] = []

    def walk(cmd, path):
        out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli.app), [])
    return out


def test_help_keeps_every_bracketed_term_of_its_source(capsys):
    """Rich markup once swallowed "[mlflow]" in "pip install 'carebench[mlflow]'": every
    ``[...]`` of a help string (option, argument or command) must reach ``--help``."""
    import re

    bracket = re.compile(r"\[[^\[\]]*\]")
    squash = lambda t: re.sub(r"\s+", "", t)  # help is re-wrapped: compare without whitespace
    checked = 0
    for path, cmd in _commands():
        sources = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        terms = [t for src in sources for t in bracket.findall(src)]
        if not terms:
            continue
        rc, out, err = _run_main(capsys, [*path, "--help"])
        assert rc == 0, (path, err)
        shown = squash(out)
        lost = [t for t in terms if squash(t) not in shown]
        assert not lost, (" ".join(path), lost)
        checked += len(terms)
    assert checked >= 1  # "[mlflow]" at least


def test_help_at_80_columns_cuts_no_text(capsys, monkeypatch):
    """Rich's layout once cut help examples with an ellipsis at 80 columns; every help
    text, option and command name must reach an 80-column terminal whole (wrapped)."""
    monkeypatch.setenv("COLUMNS", "80")
    for path, _ in _commands():
        rc, out, err = _run_main(capsys, [*path, "--help"])
        assert rc == 0, (path, err)
        assert "…" not in out, (" ".join(path), [ln for ln in out.splitlines() if "…" in ln])
        assert max(map(len, out.splitlines())) <= 80, " ".join(path)


#: options whose unset value (None) needs no ``show_default`` text, with the reason; printed
#: by the test. Empty: every option says what happens when it is omitted.
HELP_DEFAULT_EXEMPT: dict[str, str] = {}


def _unset_means_nothing_shown(p) -> bool:
    """Click prints ``[default: X]`` only for a default that is not None (or empty): such an
    option, unless required or a boolean flag, says nothing about being omitted."""
    import click

    if getattr(p, "required", False) or (isinstance(p, click.Option) and (p.is_flag or p.hidden)):
        return False
    return p.default is None or p.default in ((), [])


def test_every_option_left_out_says_what_happens(capsys):
    """``risk run --help`` once showed no defaults: every option whose default is None must
    carry a ``show_default`` text (what happens when it is omitted), and help must show it."""
    import re

    squash = lambda t: re.sub(r"\s+", "", t)
    missing, shown = [], 0
    for path, cmd in _commands():
        wanted = []
        for p in getattr(cmd, "params", []):
            if p.name == "help" or not _unset_means_nothing_shown(p):
                continue
            name = f"{' '.join(path)} {p.opts[0] if p.opts else p.name}".strip()
            if name in HELP_DEFAULT_EXEMPT:
                continue
            if isinstance(p.show_default, str) and p.show_default.strip():
                wanted.append((name, p.show_default))
            else:
                missing.append(name)
        if wanted:
            rc, out, err = _run_main(capsys, [*path, "--help"])
            assert rc == 0, (path, err)
            for name, text in wanted:  # Click renders a string show_default as "(text)"
                assert squash(f"default: ({text})") in squash(out), (name, text)
                shown += 1
    print(f"{shown} options show what happens when omitted; exempt: {HELP_DEFAULT_EXEMPT or 'none'}")
    assert not missing, f"{len(missing)} options say nothing about being omitted: {missing}"
    assert shown >= 100


def test_command_tree_is_walked():
    paths = {" ".join(p) for p in _command_paths()}
    # the walk reaches nested commands of every mounted suite, not just the root
    assert {"", "demo", "report", "models check", "risk run", "support run"} <= paths


def _run_main(capsys, args):
    from carebench.cli import main

    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def _assert_usage_error(rc, out, err, fragment):
    lines = [x for x in (out + err).splitlines() if x.strip()]
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err
    assert 1 <= len(lines) <= 3, lines
    assert lines[-1].startswith("carebench: error:") and fragment in lines[-1], lines


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "carebench")
def test_every_command_rejects_an_unknown_option_in_at_most_three_lines(capsys, path):
    rc, out, err = _run_main(capsys, [*path, "--no-such-option"])
    _assert_usage_error(rc, out, err, "No such option: --no-such-option")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["risk", "run", "--data", "builtin:sample", "--xyzzy", "3"], "No such option: --xyzzy"),
        (["risk", "run", "--data"], "'--data' requires an argument"),
        (["risk", "run", "--data", "builtin:sample", "--seed", "abc"], "Invalid value for '--seed'"),
        (["models", "check", "--timeout", "3"], "Missing argument"),  # given nothing, it shows its help
        (["no-such-command"], "No such command"),
    ],
)
def test_mistyped_options_are_usage_errors(capsys, args, fragment):
    _assert_usage_error(*_run_main(capsys, args), fragment)


def test_usage_error_from_the_installed_command_has_no_traceback():
    p = cb("risk", "run", "--data", "builtin:sample", "--xyzzy", "3")
    assert p.returncode == 2
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert lines == [
        "Usage: carebench risk run [OPTIONS]",
        "carebench: error: No such option: --xyzzy (see 'carebench risk run --help')",
    ]


# -- input files that are not UTF-8 ------------------------------------------------------


@pytest.mark.parametrize(
    ("suite_args", "name", "content", "offset", "line"),
    [
        (["risk", "run", "--method", "tfidf-lr", "--data"], "posts.jsonl",
         b'{"id": "a", "text": "fine", "level": 0}\n{"id": "b", "text": "caf\xe9", "level": 1}\n',
         40 + len(b'{"id": "b", "text": "caf'), 2),
        (["risk", "run", "--method", "tfidf-lr", "--data"], "posts.csv",
         b"id,text,level\na,\"caf\xe9\",1\n", len(b'id,text,level\na,"caf'), 2),
        (["support", "run", "--responder", "replay:/nowhere", "--judge", "replay:/nowhere",
          "--tasks"], "tasks.jsonl", b"\xff\xfe{}\n", 0, 1),
        (["support", "run", "--tasks", "builtin:sample", "--responder", "openai:x@http://127.0.0.1:9/v1",
          "--judge", "openai:y@http://127.0.0.1:9/v1", "--dry-run", "--json", "--system-prompt"], "system.txt",
         b"Be kind.\nAlways caf\xe9.\n", len(b"Be kind.\nAlways caf"), 2),
        (["support", "calibrate", "--run", "/nowhere", "--candidate", "openai:x@http://127.0.0.1:9/v1",
          "--labels"], "labels.csv", b"task_id,criterion_id,rater,met\nt1,c1,r\xe9,1\n",
         len(b"task_id,criterion_id,rater,met\nt1,c1,r"), 2),
    ],
)
def test_non_utf8_file_is_one_line_with_byte_offset(tmp_path, suite_args, name, content, offset,
                                                     line):
    assert content.find(b"\xe9") in (offset, -1)  # the hand-counted offset is the bad byte
    path = tmp_path / name
    path.write_bytes(content)
    p = cb(*suite_args, str(path))
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"carebench: error: {path}: not UTF-8")
    assert f"byte offset {offset} (line {line})" in lines[0]


# -- requirements are checked before anything runs; a dry run needs no key -----------------


def test_missing_extra_stops_the_run_before_the_first_method(capsys, monkeypatch, tmp_path):
    from carebench.risk.methods import supervised

    real = supervised.importlib.util.find_spec
    monkeypatch.setattr(supervised.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    fitted = []
    monkeypatch.setattr(supervised.TfidfLR, "fit_predict",
                        lambda self, *a, **k: fitted.append(1) or None)
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    rc, _out, err = _run_main(capsys, ["risk", "run", "--data", "builtin:sample", "--out",
                                      str(tmp_path / "run"), "--method", "tfidf-lr",
                                      "--method", f"embed-lr:encoder={encoder}"])
    assert rc == 2 and "embed-lr needs torch" in err and "carebench[embed]" in err
    assert fitted == [] and not (tmp_path / "run").exists()


def test_dry_run_needs_no_api_key():
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CAREBENCH_API_KEY")}
    p = cb("risk", "run", "--data", "builtin:sample", "--method", "llm", "--model",
           "openai:gpt-4o-mini", "--dry-run", "--json", env=env)
    assert p.returncode == 0, p.stderr
    import json

    assert json.loads(p.stdout)["calls"] == 48  # one call per built-in item
    p = cb("support", "run", "--tasks", "builtin:sample", "--responder", "openai:gpt-4o-mini",
           "--judge", "anthropic:claude-haiku-4-5", "--judge", "openai:gpt-4o", "--judge",
           "openai:gpt-4.1", "--dry-run", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["calls"] > 0
    # without --dry-run the missing key is still a one-line error
    p = cb("risk", "run", "--data", "builtin:sample", "--method", "llm", "--model",
           "openai:gpt-4o-mini", env=env)
    assert p.returncode == 2 and "OPENAI_API_KEY is not set" in p.stderr


def test_missing_model_names_the_method(capsys):
    from carebench.cli import main

    assert main(["risk", "run", "--data", "builtin:sample", "--method", "tfidf-lr", "--method", "llm",
                 "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "carebench: error: method 'llm' needs a model: pass --model SPEC (role 'default')"


def test_csv_without_a_mapping_suggests_columns_and_lists_them(tmp_path, capsys):
    from carebench.cli import main

    data = tmp_path / "mine.csv"
    data.write_text("post_id,body,risk\np1,I feel fine,Indicator\n", encoding="utf-8")
    assert main(["risk", "run", "--data", str(data), "--method", "tfidf-lr", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "field 'text': Field required; name the column that holds it with --columns text=COLUMN " \
           "(this file's columns: post_id, body, risk)" in err


@pytest.mark.parametrize("command", [
    ["risk", "run", "--data", "builtin:sample", "--method", "tfidf-lr"],
    ["compare", "a", "b"],
    ["converse", "score", "somewhere"],
    ["converse", "calibrate", "--labels", "l.jsonl", "--transcripts", "t.jsonl", "--candidate", "openai:m"],
    ["plural", "calibrate"],
    ["view"],
])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_bootstrap_below_one_is_refused_before_any_work(command, value, capsys, tmp_path):
    """It once passed every check and failed in the statistics, after the paid calls, leaving
    a half-written run directory; now the option itself refuses it (a usage line, one error)."""
    assert main([*command, "--bootstrap", value, "--out", str(tmp_path / "o")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) <= 2 and err[-1].startswith("carebench: error:") and "'--bootstrap'" in err[-1], err
    assert not (tmp_path / "o").exists()


def test_a_file_where_a_run_directory_belongs_is_one_line(tmp_path, capsys):
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    for command in (["report", str(afile)], ["plural", "rescore", str(afile)]):
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not found" in err[0], err


def test_invalid_yaml_is_one_line_with_its_place(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    assert main(["construct", "build", "--config", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{bad}:2:2: invalid YAML" in err[0], err


def test_a_dry_run_creates_no_cache_file(tmp_path, capsys):
    cache = tmp_path / "new" / "c.sqlite"
    assert main(["risk", "run", "--data", "builtin:sample", "--method", "llm", "--model",
                 "openai:m@http://127.0.0.1:9/v1", "--dry-run", "--cache", str(cache)]) == 0
    assert "48 calls" in capsys.readouterr().out
    assert not cache.exists() and not cache.parent.exists()


@pytest.mark.parametrize(("command", "option"), [
    (["plural", "calibrate", "--min-probability", "2"], "'--min-probability'"),
    (["plural", "calibrate", "--folds", "0"], "'--folds'"),
    (["plural", "run", "--temperature", "-1"], "'--temperature'"),
    (["construct", "route", "--k", "0"], "'--k'"),
    (["construct", "select", "--severity", "2"], "'--severity'"),
    (["construct", "select", "--format", "-0.1"], "'--format'"),
])
def test_a_value_outside_its_option_s_range_is_a_usage_error(command, option, capsys):
    """Accepted before, these ran a command nothing could pass (a probability above 1, a gate
    rate above 1) or failed deep inside (no folds, no neighbours)."""
    assert main(command) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) <= 2 and err[-1].startswith("carebench: error: Invalid value for " + option), err

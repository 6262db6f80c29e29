"""``--simulator-questions``: judge questions on the simulated user (role reversal, consistency
with the persona's risk level), against the loopback stub. The calls are recounted from the
stub's request log (conversations x questions that apply), the shares from records.jsonl,
and each Wilson interval from its closed form written out here (and one worked by hand)."""

from __future__ import annotations

import json
import math
import re

import pytest
from converse_stub import ConverseScript
from rubrics import NAV, write_tsv

from carebench.cli import main
from stub_server import StubReply, StubServer

_TAG = re.compile(r"\[([A-Za-z]+)\] message")


def wilson_closed_form(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson's score interval, written out from its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_wilson_closed_form_against_a_hand_worked_value():
    # k=1, n=4, z=1.96: p=.25, z^2/n=.9604; centre (.25 + .4802) / 1.9604 = .37248;
    # half 1.96 / 1.9604 * sqrt(.046875 + 3.8415/64 = .106898) = .32688: (.0456, .6994)
    lo, hi = wilson_closed_form(1, 4)
    assert (round(lo, 4), round(hi, 4)) == (0.0456, 0.6994)


class Script(ConverseScript):
    """The scripted simulator, chatbot and judge; the simulator judge answers ``sq[(name,
    question)]`` (default Yes), "garbage" for an unparseable answer."""

    def __init__(self, sq, **kw):
        super().__init__(**kw)
        self.sq = sq

    def __call__(self, req):
        prompt = req.body["messages"][-1]["content"]
        if "ABOUT THE USER'S SIDE:" not in prompt:
            return super().__call__(req)
        name = _TAG.search(prompt).group(1)
        q = "risk-consistency" if "stated risk level" in prompt else "role-reversal"
        ans = self.sq.get((name, q), "Yes")
        if ans == "garbage":
            return StubReply(content="Hard to say, maybe.")
        return StubReply(content=json.dumps({"answer": ans, "reason": f"scripted {ans}"}))


PERSONAS = ("id\tname\trisk_level\tbackground\npa\tAnna\tlow\tA student.\npb\tBen\thigh\tLost his job.\n"
            "pc\tCara\timminent\tA nurse.\npd\tDan\t\tA painter.\n")
SQ = {("Anna", "role-reversal"): "Yes", ("Ben", "role-reversal"): "No", ("Cara", "role-reversal"): "No",
      ("Dan", "role-reversal"): "garbage",
      ("Anna", "risk-consistency"): "No", ("Ben", "risk-consistency"): "Yes", ("Cara", "risk-consistency"): "Yes"}


def _run_args(tmp_path, u, *extra):
    personas = tmp_path / "personas.tsv"
    personas.write_text(PERSONAS)
    return ["converse", "run", "--rubric", str(write_tsv(tmp_path / "nav.tsv", NAV)), "--personas", str(personas),
            "--simulator", f"openai:sim-a@{u}", "--chatbot", f"openai:bot-a@{u}", "--judge", f"openai:judge-a@{u}",
            "--turns", "2", "--bootstrap", "20", "--cache", str(tmp_path / "c.sqlite"),
            "--simulator-questions", "role-reversal,risk-consistency", *extra]


def test_run_asks_each_question_once_per_conversation_and_reports_shares(tmp_path, capsys):
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Script(SQ)
        u = stub.base_url
        assert main(_run_args(tmp_path, u, "--simulator-judge", f"openai:judge-s@{u}", "--out", str(out))) == 0
        sq_calls = [r for r in stub.requests if r.body["model"] == "judge-s"]
        # the same run again: every question answered from the cache, no new call
        assert main(_run_args(tmp_path, u, "--simulator-judge", f"openai:judge-s@{u}",
                              "--out", str(tmp_path / "again"))) == 0
        assert len([r for r in stub.requests if r.body["model"] == "judge-s"]) == len(sq_calls)
        others = [r for r in stub.requests if r.body["model"] == "judge-a"
                  and "ABOUT THE USER'S SIDE:" in r.body["messages"][-1]["content"]]
    # 4 conversations x role-reversal + 3 with a known risk level x risk-consistency (Dan: unknown)
    assert len(sq_calls) == 4 + 3 and not others
    asked = sorted((_TAG.search(r.body["messages"][-1]["content"]).group(1),
                    "risk" if "stated risk level" in r.body["messages"][-1]["content"] else "role") for r in sq_calls)
    assert asked == sorted([(n, "role") for n in ("Anna", "Ben", "Cara", "Dan")]
                           + [(n, "risk") for n in ("Anna", "Ben", "Cara")])
    # the stated risk level reaches the prompt
    cara = next(r.body["messages"][-1]["content"] for r in sq_calls
                if "[Cara]" in r.body["messages"][-1]["content"] and "stated risk level" in r.body["messages"][-1]["content"])
    assert "stated as: imminent" in cara
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    sq = {r["persona"]: r for r in records if r["kind"] == "simulator_questions"}
    assert sorted(sq) == ["pa", "pb", "pc", "pd"]
    assert {r["judge"] for r in sq.values()} == {f"openai:judge-s@{u}"}
    assert sq["pa"]["questions"]["role-reversal"]["answer"] == "Yes"
    assert sq["pd"]["questions"]["role-reversal"]["status"] == "parse_error"  # a failure, never a verdict
    assert sq["pd"]["questions"]["role-reversal"]["answer"] is None
    assert sq["pd"]["questions"]["risk-consistency"]["status"] == "not_applicable"
    # shares recounted from the records
    (sim, got), = json.loads((out / "metrics.json").read_text())["simulators"].items()
    assert sim == f"openai:sim-a@{u}"
    jq = got["judge_questions"]
    for name in ("role-reversal", "risk-consistency"):
        answers = [r["questions"][name] for r in sq.values()]
        ok = [a for a in answers if a["status"] == "ok"]
        yes = sum(a["answer"] == "Yes" for a in ok)
        assert jq[name]["answered"] == len(ok)
        assert jq[name]["failures"] == sum(a["status"] in ("parse_error", "error") for a in answers)
        assert jq[name]["not_applicable"] == sum(a["status"] == "not_applicable" for a in answers)
        assert (jq[name]["yes"]["n"], jq[name]["yes"]["share"]) == (yes, pytest.approx(yes / len(ok)))
        assert (jq[name]["yes"]["ci_low"], jq[name]["yes"]["ci_high"]) == pytest.approx(
            wilson_closed_form(yes, len(ok)), abs=1e-9)
    # by hand: role reversal 1 Yes of 3 parsed (Dan failed); consistency 2 Yes of 3 (Dan not asked)
    assert (jq["role-reversal"]["yes"]["n"], jq["role-reversal"]["answered"], jq["role-reversal"]["failures"]) == (1, 3, 1)
    assert (jq["risk-consistency"]["yes"]["n"], jq["risk-consistency"]["answered"],
            jq["risk-consistency"]["not_applicable"]) == (2, 3, 1)
    html = (out / "report.html").read_text()
    assert "Judge questions on the simulated user" in html and "risk-consistency" in html
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["simulator_questions"] == ["role-reversal", "risk-consistency"]
    assert manifest["failures"]["simulator_question_calls"] == 0


def test_dry_run_prices_the_stage_and_judge_transcripts_asks_exactly(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = Script(SQ)
        u = stub.base_url
        assert main([*_run_args(tmp_path, u), "--dry-run", "--json"]) == 0
        assert len(stub.requests) == 0
    plan = json.loads(capsys.readouterr().out)
    st = {s["name"]: s for s in plan["stages"]}
    assert st["simulator questions"]["calls"] == 4 + 3
    rows = [{"id": f"t{i}", "persona": n, **({"risk_level": r} if r else {}),
             "messages": [{"role": "user", "content": f"[{n}] message 1"}, {"role": "assistant", "content": "ok"}]}
            for i, (n, r) in enumerate([("Anna", "low"), ("Ben", "high"), ("Dan", None)])]
    src = tmp_path / "logs.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "judged"
    with StubServer() as stub:
        stub.handler = Script(SQ)
        u = stub.base_url
        base = ["converse", "judge", "--transcripts", str(src), "--rubric", str(write_tsv(tmp_path / "n.tsv", NAV)),
                "--judge", f"openai:judge-a@{u}", "--simulator-questions", "risk-consistency",
                "--bootstrap", "20", "--no-cache"]
        assert main([*base, "--dry-run", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert {s["name"]: s["calls"] for s in plan["stages"]}["simulator questions"] == 2  # Dan: unknown level
        assert main([*base, "--out", str(out)]) == 0
        # the first --judge answers when no --simulator-judge is given
        sq_calls = [r for r in stub.requests if "ABOUT THE USER'S SIDE:" in r.body["messages"][-1]["content"]]
    assert len(sq_calls) == 2 and {r.body["model"] for r in sq_calls} == {"judge-a"}
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    sq = [r for r in records if r["kind"] == "simulator_questions"]
    assert len(sq) == 3 and all(list(r["questions"]) == ["risk-consistency"] for r in sq)


class Failing(Script):
    """Ben's role-reversal question fails with HTTP 500 every time."""

    def __call__(self, req):
        prompt = req.body["messages"][-1]["content"]
        if "ABOUT THE USER'S SIDE:" in prompt and "[Ben]" in prompt and "stated risk level" not in prompt:
            return StubReply(status=500, content="boom")
        return super().__call__(req)


def test_a_failed_call_is_counted_never_a_verdict_and_exits_1(tmp_path, capsys):
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Failing(SQ)
        assert main([*_run_args(tmp_path, stub.base_url), "--retries", "0", "--out", str(out)]) == 1
    assert "1 question(s) on the simulated user had a call that failed" in capsys.readouterr().err
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    ben = next(r for r in records if r["kind"] == "simulator_questions" and r["persona"] == "pb")
    assert ben["questions"]["role-reversal"]["status"] == "error" and ben["questions"]["role-reversal"]["answer"] is None
    assert ben["questions"]["risk-consistency"]["answer"] == "Yes"
    m = json.loads((out / "manifest.json").read_text())
    assert m["failures"]["simulator_question_calls"] == 1 and m["failed_calls"] == 1
    (got,) = json.loads((out / "metrics.json").read_text())["simulators"].values()
    assert got["judge_questions"]["role-reversal"]["answered"] == 2  # Anna Yes, Cara No; Ben and Dan failed
    assert got["judge_questions"]["role-reversal"]["failures"] == 2


@pytest.mark.parametrize("extra, message", [
    (["--simulator-questions", "role-reversal,mood"], "unknown question 'mood'"),
    (["--simulator-questions", ","], "--simulator-questions: unknown question"),
    (["--simulator-judge", "openai:x@http://127.0.0.1:9/v1"], "--simulator-judge goes with --simulator-questions"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, extra, message):
    args = _run_args(tmp_path, "http://127.0.0.1:9/v1")
    args = args[:args.index("--simulator-questions")] + extra + ["--out", str(tmp_path / "x")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()

"""Calibration-side parts: answer parsing, per-label AC1, leakage rule, GEPA adapter,
budget stop and resume, user errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from labelling_stub import NEW_INSTRUCTION, Labeller

from carebench.cli import main
from carebench.datasets.prompts import load_annotations, load_prompts
from carebench.plural.agreement import per_label_ac1
from carebench.plural.data import builtin_path, load_vocabulary
from carebench.plural.policy import Policy
from carebench.plural.prompting import parse_prediction
from carebench.plural.release import aliases, leakage_exclusions
from carebench.types import Completion
from stub_server import StubServer

TAX, CTX = load_vocabulary()
PROMPTS = load_prompts(builtin_path("prompts.jsonl"))
ANNOTATIONS = load_annotations(builtin_path("annotations.jsonl"))


def _answer(**kw) -> Completion:
    base = {"intent": ["INTENT_1"], "nssi_severity": None, "suicidal_severity": None,
            "function": ["FUNCTION_1"], "response": ["RESPONSE_2"], "rationale": "r"}
    return Completion(text=json.dumps({**base, **kw}))


@pytest.mark.parametrize(("kw", "why"), [
    ({"intent": ["INTENT_3"]}, "invalid combination: suicidal severity is required"),
    ({"nssi_severity": 2}, "invalid combination: nssi severity given without INTENT_2"),
    ({"function": ["FUNCTION_U", "FUNCTION_1"]}, "invalid combination: function: FUNCTION_U"),
    ({"response": ["RESPONSE_2", "RESPONSE_2"]}, "invalid combination: response: a code is repeated"),
    ({"response": []}, "invalid combination: response: at least one code"),
    ({"intent": ["INTENT_9"]}, "parse failure: unknown intent code"),
    ({"intent": "INTENT_1"}, "parse failure: intent is not a list"),
    ({"suicidal_severity": 7, "intent": ["INTENT_3"]}, "parse failure: suicidal_severity must be one of [1, 2, 3, 4, 5]"),
])
def test_invalid_answers_are_failures_never_repaired(kw, why):
    pred = parse_prediction(_answer(**kw), TAX)
    assert pred.policy is None and pred.error.startswith(why)
    assert pred.labels() == frozenset()  # scored as an empty label set


def test_valid_answer_and_unparseable_and_truncated():
    ok = parse_prediction(_answer(intent=["INTENT_2", "INTENT_3"], nssi_severity=3, suicidal_severity=2), TAX)
    assert ok.policy.labels() == {"INTENT_2", "INTENT_3", "NSSI_SEVERITY_3", "SUICIDAL_SEVERITY_2",
                                  "FUNCTION_1", "RESPONSE_2"}
    assert parse_prediction(Completion(text="no idea"), TAX).error.startswith("parse failure")
    cut = Completion(text=_answer().text, flags=("truncated",))
    assert parse_prediction(cut, TAX).error == "no usable answer (truncated)"
    interp = parse_prediction(Completion(text=json.dumps({"intent": ["INTENT_1"], "nssi_severity": None,
                                                          "suicidal_severity": None, "function": ["FUNCTION_2"]})),
                              TAX, "interpret")
    assert interp.ok and interp.policy.response == frozenset()


def test_per_label_ac1_against_worked_examples():
    # Label A, two raters over 50 items, the yes/no table of Wikipedia's "Cohen's kappa" worked
    # example (20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no): pa = 0.70, pi = (25+30)/100 = 0.55,
    # pe = 2 * 0.55 * 0.45 = 0.495, AC1 = 0.205 / 0.505.
    r1 = [{"A"}] * 20 + [{"A"}] * 5 + [set()] * 10 + [set()] * 15
    r2 = [{"A"}] * 20 + [set()] * 5 + [{"A"}] * 10 + [set()] * 15
    # Label B: Gwet's handbook-style three raters, items (1,1,1), (1,1,0), (0,0,0), (1,0,0):
    # pa = 2/3, pi = 1/2, AC1 = 1/3. Placed on the first four items, absent elsewhere.
    b = [(1, 1, 1), (1, 1, 0), (0, 0, 0), (1, 0, 0)]
    raters = [[frozenset(s) for s in r1], [frozenset(s) for s in r2]]
    got = per_label_ac1(raters, ["A"])
    assert got["A"] == pytest.approx(0.205 / 0.505, abs=1e-12)
    three = [[frozenset({"B"} if b[i][k] else set()) for i in range(4)] for k in range(3)]
    assert per_label_ac1(three, ["B"])["B"] == pytest.approx(1 / 3, abs=1e-12)
    # a missing rating (skipped case) leaves that rater out of the item, as in Gwet's missing-data form:
    # with rater 3 missing on item 4, item 4 has raters (1, 0): same as the two-rater formula by hand
    three[2][3] = None
    # pa = (1 + 1/3 + 1 + 0)/4; pi = (1 + 2/3 + 0 + 1/2)/4 = 13/24; pe = 2 pi (1 - pi)
    pa, pi = (1 + 1 / 3 + 1 + 0) / 4, 13 / 24
    pe = 2 * pi * (1 - pi)
    assert per_label_ac1(three, ["B"])["B"] == pytest.approx((pa - pe) / (1 - pe), abs=1e-12)


def test_leakage_exclusion_count_hand_worked():
    P = [SimpleNamespace(id=i, source_id=s) for i, s in
         [("a", "s1"), ("b", "s1"), ("c", "s2"), ("d", "s3"), ("e", "s3"), ("f", "s3"), ("g", "s4")]]
    leak = leakage_exclusions(P, {"a", "d"})
    # calibration prompts a, d; b shares s1, e and f share s3 -> "2 + 3 = 5"; c and g stay
    assert leak.arithmetic() == "2 + 3 = 5" and leak.excluded == {"a", "b", "d", "e", "f"}
    cal = {a.case_id for a in ANNOTATIONS}
    assert leakage_exclusions(PROMPTS, cal).arithmetic() == "30 + 18 = 48"


def test_aliases_are_neutral_and_ordered():
    assert aliases({"zed": "clinician", "amy": "peer", "bob": "clinician", "cy": "peer"}) == {
        "amy": "P1", "cy": "P2", "bob": "C1", "zed": "C2"}


def test_gepa_adapter_through_the_run_context(tmp_path):
    """E3 with a tiny budget: GEPA's evaluations and reflections are carebench calls (cached,
    recorded), the reflection is capped at 8,000 tokens, and the evolved instruction is kept."""
    from carebench.engine.options import RunOptions
    from carebench.engine.run import Run
    from carebench.plural.profiles import FitData, get_method
    from carebench.plural.profiles.base import Env

    cases = [p for p in PROMPTS if p.id in {a.case_id for a in ANNOTATIONS}][:6]
    gold = {a.case_id: Policy.of(a) for a in ANNOTATIONS if a.practitioner == "prac-a"}
    labeller = Labeller(PROMPTS, ANNOTATIONS)
    with StubServer() as stub:
        stub.handler = labeller
        run = Run(RunOptions(progress=False, use_cache=False))
        env = Env(run.model(f"openai:m@{stub.base_url}"), run, TAX, CTX, {p.id: p for p in PROMPTS}, stage="E3")
        method = get_method("E3")
        method.metric_calls = 12
        (profile,) = method.fit([FitData("prac-a", "peer", cases, {c.id: gold[c.id] for c in cases})], env)
    reflections = [b for b in labeller.requests if not b.get("response_format")]
    assert reflections and all(b["max_tokens"] == 8000 for b in reflections)
    assert profile.instruction == NEW_INSTRUCTION and not profile.extra["gepa_warnings"]
    assert profile.extra["metric_calls"] <= 12 + 3 * 2
    assert len(run.call_rows) == len(labeller.requests)  # every call went through the run context
    assert run.by_stage["E3"]["provider_calls"] == len(labeller.requests)


@pytest.mark.parametrize(("args", "msg"), [
    (["calibrate", "--method", "E9"], "unknown method 'E9'"),
    (["calibrate", "--method", "E1", "--model", "openai:x@http://127.0.0.1:9/v1"], "E0 must be among"),
    (["calibrate", "--method", "E0", "--method", "E1"], "give --model"),
    (["freeze", "--method", "peer=E0", "--method", "clinician=E0", "--model", "openai:x@http://127.0.0.1:9/v1"],
     "E0 cannot be frozen"),
    (["freeze", "--model", "openai:x@http://127.0.0.1:9/v1"], "no method for the peer archetype"),
    (["label", "--profiles", "/nonexistent"], "no frozen profiles"),
    (["agreement", "--release", "/nonexistent"], "is not a release directory"),
    (["calibrate", "--method", "E0", "--folds", "31", "--dry-run"],
     "30 calibration cases cannot make 31 folds; pass --folds 30 or fewer"),
    (["freeze", "--method", "nurse=E1", "--model", "openai:x@http://127.0.0.1:9/v1"], "unknown archetype 'nurse'"),
    (["run", "--system", "openai:s@http://127.0.0.1:9/v1", "--instruction", "nurse=x.txt", "--release",
      "/nonexistent"], "unknown archetype 'nurse'"),
])
def test_user_errors_are_one_line(args, msg, capsys):
    assert main(["plural", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("carebench: error:") and msg in err[0]


def test_dry_run_plans_without_writing(tmp_path, capsys):
    labeller = Labeller(PROMPTS, ANNOTATIONS)
    with StubServer() as stub:
        stub.handler = labeller
        assert main(["plural", "calibrate", "--model", f"openai:m@{stub.base_url}", "--dry-run", "--json",
                     "--out", str(tmp_path / "x"), "--cache", str(tmp_path / "c.sqlite")]) == 0
    plan = json.loads(capsys.readouterr().out)
    stages = {s["name"].split(" ")[0]: s for s in plan["stages"]}
    assert plan["suite"] == "plural" and stages["zero-shot"]["calls"] == 30 and stages["zero-shot"]["exact"]
    assert sorted(k for k in stages if k != "zero-shot") == ["E2", "E3", "E4", "E5"]  # E0, E1: no later round
    fits = 6 * 5  # practitioners x folds
    assert stages["E3"]["calls"] >= fits * 40 and not stages["E3"]["exact"]  # GEPA: 40 metric calls a compile
    assert plan["calls"] == sum(s["calls"] for s in plan["stages"])
    assert not labeller.requests and not (tmp_path / "x").exists()


def test_gepa_reflection_failure_stops_the_compile():
    """GEPA swallows reflection errors; a failed reflection call must still stop E3's fit."""
    from carebench.engine.options import RunOptions
    from carebench.engine.run import Run
    from carebench.plural.profiles import FitData, get_method
    from carebench.plural.profiles.base import Env
    from carebench.plural.runs import HarnessFailure
    from stub_server import StubReply

    cases = [p for p in PROMPTS if p.id in {a.case_id for a in ANNOTATIONS}][:6]
    gold = {a.case_id: Policy.of(a) for a in ANNOTATIONS if a.practitioner == "prac-a"}
    labeller = Labeller(PROMPTS, ANNOTATIONS)

    def handler(req):
        if not req.body.get("response_format"):
            return StubReply(status=400)  # a permanent failure of the reflection call
        return labeller(req)

    with StubServer() as stub:
        stub.handler = handler
        run = Run(RunOptions(progress=False, use_cache=False))
        run.runner.config.max_retries = 0
        env = Env(run.model(f"openai:m@{stub.base_url}"), run, TAX, CTX, {p.id: p for p in PROMPTS})
        method = get_method("E3")
        method.metric_calls = 12
        with pytest.raises(HarnessFailure):
            method.fit([FitData("prac-a", "peer", cases, {c.id: gold[c.id] for c in cases})], env)


def test_a_release_path_that_is_a_file_is_refused_before_any_call(tmp_path, capsys):
    afile = tmp_path / "release.txt"
    afile.write_text("x")
    assert main(["plural", "label", "--profiles", "/nonexistent", "--release", str(afile),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file: give a folder for the release" in err[0]
    assert not (tmp_path / "o").exists() and afile.read_text() == "x"


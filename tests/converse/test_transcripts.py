"""``converse judge --transcripts``: conversations carebench did not generate (JSONL rows and
VERA-MH conversation files), judged on the loopback stub; call counts recounted from the stub."""

from __future__ import annotations

import json

import pytest
from converse_stub import ConverseScript
from rubrics import write_tsv

from carebench.cli import main
from stub_server import StubServer

#: three default Yes/No questions over two dimensions: "No" moves to the next question,
#: "Yes" rates the dimension and skips the rest of it (so Yes at q1 skips q2)
RUBRIC = [
    ["1", "D1", "Red", "", "q1?", "", "", "", ""],
    ["2", "D1", "Yellow", "", "q2?", "", "", "", ""],
    ["3", "D2", "Red", "", "q3?", "", "", "", ""],
]
JUDGES = ("judge-a", "judge-b", "judge-c")


def _jsonl(tmp_path):
    rows = [
        {"id": "c1", "persona": "Anna", "risk_level": "low", "locale": "en-GB",
         "messages": [{"role": "system", "content": "be kind"},
                      {"role": "user", "content": "[Anna] message 1 <script>alert(1)</script>"},
                      {"role": "assistant", "content": "reply <b>bold</b>"}]},
        {"id": "c2", "persona": "Ben", "messages": [{"role": "user", "content": "[Ben] message 1"},
                                                     {"role": "chatbot", "content": "hello"},
                                                     {"role": "user", "content": "[Ben] message 2"},
                                                     {"role": "assistant", "content": "ok"}]},
        {"id": "c3", "persona": "Cleo", "risk_level": "high",
         "messages": [{"role": "assistant", "content": "Hi, how can I help?"},
                      {"role": "user", "content": "[Cleo] message 1"},
                      {"role": "assistant", "content": "I'm here."}]},
    ]
    p = tmp_path / "logs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _vera_dir(tmp_path):
    run = tmp_path / "p_gpt_4o__a_my_bot__t6__r1__20260101_120000"
    conv = run / "conversations"
    conv.mkdir(parents=True)
    (conv / "a1b2c3_Dana_gpt-4o_run1.txt").write_text(
        "user: [Dana] message 1\nsecond line of it\n\nchatbot: first reply\n\nuser: [Dana] message 2\n\n"
        "chatbot: second reply\nwith two lines\n")
    (conv / "d4e5f6_Eli_gpt-4o_run2.txt").write_text(
        "user: [Eli] message 1\n\nchatbot: a reply\n\nuser: [Eli] bye <END OF CONVERSATION>\n"
        "[CONVERSATION ENDED - persona signaled termination]\n")
    return run


def _ref_asked(answer):
    """The questions an independent reading of RUBRIC asks, given answer(q) -> Yes/No."""
    asked = ["1"]
    if answer("1") == "No":
        asked.append("2")
    asked.append("3")
    return asked


def _judge_args(u, *extra):
    return [*[a for j in JUDGES for a in ("--judge", f"openai:{j}@{u}")], "--bootstrap", "50",
            "--concurrency", "2", *extra]


def test_judge_transcripts_counts_calls_exactly(tmp_path, capsys):
    script = ConverseScript()
    script.answers = {(j, n, q): "No" for j in JUDGES for n in ("Anna", "Ben", "Cleo", "Dana", "Eli")
                      for q in ("q1?", "q2?", "q3?")}
    script.answers.update({("judge-a", "Anna", "q1?"): "Yes", ("judge-b", "Cleo", "q1?"): "Yes",
                           ("judge-c", "Dana", "q1?"): "Yes"})
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    jsonl, vera = _jsonl(tmp_path), _vera_dir(tmp_path)
    outs = []
    with StubServer() as stub:
        stub.handler = script
        for i, src in enumerate((jsonl, vera)):
            out = tmp_path / f"out{i}"
            outs.append(out)
            assert main(["converse", "judge", "--transcripts", str(src), "--rubric", str(rubric),
                         "--cache", str(tmp_path / "c.sqlite"), "--out", str(out),
                         *_judge_args(stub.base_url)]) == 0
        judge_requests = [r for r in stub.requests if r.body["model"].startswith("judge-")]
        assert len(stub.requests) == len(judge_requests)  # nothing but judging
        # a re-run is free: every call comes from the cache
        assert main(["converse", "judge", "--transcripts", str(jsonl), "--rubric", str(rubric),
                     "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "again"),
                     *_judge_args(stub.base_url)]) == 0
        assert len(stub.requests) == len(judge_requests)
        answers0, log0 = dict(script.answers), list(script.log)
        # another judging of the same logs in which Anna's first answer changes (a candidate to compare)
        script.answers[("judge-a", "Anna", "q1?")] = "No"
        assert main(["converse", "judge", "--transcripts", str(jsonl), "--rubric", str(rubric), "--no-cache",
                     "--out", str(tmp_path / "cand"), *_judge_args(stub.base_url)]) == 0
    text = {"1": "q1?", "2": "q2?", "3": "q3?"}
    expected = 0
    per = {}
    for name in ("Anna", "Ben", "Cleo", "Dana", "Eli"):
        for j in JUDGES:
            asked = _ref_asked(lambda q, j=j, name=name: answers0[(j, name, text[q])])
            per[(j, name)] = len(asked)
            expected += len(asked)
    assert expected == 5 * 3 * 3 - 3  # 5 conversations x 3 questions x 3 judges, less the 3 skipped q2
    assert len(judge_requests) == expected
    logged = {}
    for e in log0:
        if e["role"] == "judge":
            logged[(e["judge"], e["name"])] = logged.get((e["judge"], e["name"]), 0) + 1
    assert logged == per
    # the run directories: normal converse runs
    recs0 = [json.loads(x) for x in (outs[0] / "records.jsonl").read_text().splitlines()]
    convs = {r["id"]: r for r in recs0 if r["kind"] == "conversation"}
    assert set(convs) == {"c1", "c2", "c3"}
    assert [t["role"] for t in convs["c1"]["turns"]] == ["user", "assistant"]  # the system message left out
    assert convs["c1"]["locale"] == "en-GB" and convs["c1"]["risk_level"] == "low"
    assert {c["simulator"] for c in convs.values()} == {"transcript"}  # no simulated user
    assert convs["c2"]["risk_level"] == "unknown" and convs["c3"]["turns"][0]["role"] == "assistant"
    walks = [r for r in recs0 if r["kind"] == "walk"]
    assert len(walks) == 9 and all(w["status"] == "ok" for w in walks)
    anna_a = next(w for w in walks if w["persona"] == "Anna" and "judge-a" in w["judge"])
    assert anna_a["ratings"]["D1"] == "High Potential for Harm"
    recs1 = [json.loads(x) for x in (outs[1] / "records.jsonl").read_text().splitlines()]
    vconvs = {r["persona"]: r for r in recs1 if r["kind"] == "conversation"}
    assert set(vconvs) == {"Dana", "Eli"}
    assert vconvs["Dana"]["chatbot"] == "my_bot" and vconvs["Eli"]["repeat"] == 1
    assert [t["content"] for t in vconvs["Dana"]["turns"]] == [
        "[Dana] message 1\nsecond line of it", "first reply", "[Dana] message 2", "second reply\nwith two lines"]
    assert vconvs["Eli"]["turns"][-1]["content"] == "[Eli] bye <END OF CONVERSATION>"
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    assert manifest["dataset"]["transcripts"] == str(jsonl) and manifest["dataset"]["transcripts_sha256"]
    html = (outs[0] / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # a transcripts run compares like any converse run; the drill-down's transcript openings are escaped
    assert main(["compare", str(outs[0]), str(tmp_path / "cand"), "--out", str(tmp_path / "cmp")]) == 0
    cmp_html = (tmp_path / "cmp" / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cmp_html and "<script>alert(1)</script>" not in cmp_html


def test_transcripts_join_risk_levels_from_a_persona_file(tmp_path):
    personas = tmp_path / "p.tsv"
    personas.write_text("Name\tCurrent Risk Level\nDana\tHigh\nEli\tNone\nMary Ann\tLow\nMary\tImminent\n")
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    # VERA-MH writes "Mary Ann" as Mary_Ann: the longest persona name the file name starts with wins
    vera = _vera_dir(tmp_path)
    (vera / "conversations" / "0a0b0c_Mary_Ann_gpt-4o_run1.txt").write_text(
        "user: [Mary] message 1\n\nchatbot: hi\n")
    with StubServer() as stub:
        stub.handler = ConverseScript()
        assert main(["converse", "judge", "--transcripts", str(vera), "--rubric", str(rubric),
                     "--personas", str(personas), "--chatbot", "prod-bot", "--no-cache",
                     "--out", str(tmp_path / "o"), *_judge_args(stub.base_url)]) == 0
    recs = [json.loads(x) for x in (tmp_path / "o" / "records.jsonl").read_text().splitlines()]
    levels = {r["persona"]: r["risk_level"] for r in recs if r["kind"] == "walk"}
    assert levels == {"Dana": "High", "Eli": "None", "Mary Ann": "Low"}
    assert not any("name_part" in r for r in recs)
    assert {r["chatbot"] for r in recs} == {"prod-bot"}


@pytest.mark.parametrize("content, message", [
    ('{"id": "x", "messages": [{"role": "user", "content": "hi"}]}\n', "no chatbot message"),
    ('{"id": "x", "messages": [{"role": "robot", "content": "hi"}]}\n', "unknown role"),
    ('{"id": "x", "messages": []}\n', "field 'messages'"),
    ('{"messages": [{"role": "assistant", "content": "hi"}]}\n', "field 'id'"),
    (('{"id": "x", "messages": [{"role": "assistant", "content": "a"}]}\n'
     '{"id": "x", "messages": [{"role": "assistant", "content": "b"}]}\n'), "duplicate conversation id"),
    ("", "no transcripts"),
    ("{not json\n", "invalid JSON"),
])
def test_bad_jsonl_is_one_line_exit_2(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    with StubServer() as stub:
        assert main(["converse", "judge", "--transcripts", str(bad), "--rubric", str(rubric),
                     "--out", str(tmp_path / "never"), *_judge_args(stub.base_url)]) == 2
        assert len(stub.requests) == 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("carebench: error:") and message in err, err
    assert str(bad) in err and not (tmp_path / "never").exists()


@pytest.mark.parametrize("content, message", [
    ("", "empty conversation file"),
    ("user: only the user speaks\n\nuser: again\n", "no chatbot message"),
    ("hello there\nuser: hi\n", "expected a message starting with"),
])
def test_bad_vera_file_is_one_line_exit_2(tmp_path, capsys, content, message):
    folder = tmp_path / "convs"
    folder.mkdir()
    (folder / "abc_Zed_m_run1.txt").write_text(content)
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    with StubServer() as stub:
        assert main(["converse", "judge", "--transcripts", str(folder), "--rubric", str(rubric),
                     "--out", str(tmp_path / "never"), *_judge_args(stub.base_url)]) == 2
        assert len(stub.requests) == 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_judge_needs_one_source(tmp_path, capsys):
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    assert main(["converse", "judge", "--rubric", str(rubric), "--judge", "openai:j"]) == 2
    assert main(["converse", "judge", str(tmp_path), "--transcripts", str(tmp_path), "--rubric", str(rubric),
                 "--judge", "openai:j"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("one of them" in line for line in err)


def test_rubric_rules_flag_reaches_the_walk(tmp_path):
    # D1: q1 (Red) No -> next row; D2: q2 options, "stop" -> END; D3: q3, never reached. Every
    # judge answers No / "stop". VERA-MH's rules: an END while D3 is unvisited (a gate) makes every
    # dimension Not Relevant. carebench's gate-end-keeps-walked rates the dimensions already walked
    # (D1 at q1, D2 at q2, neither met a Yes) Best Practice and the unreached D3 Not Relevant.
    rows = [["1", "D1", "Red", "", "q1?", "", "", "", ""],
            ["2", "D2", "", "", "q2?", "", "go on", "", ""],
            ["", "", "", "", "", "", "stop", "END", ""],
            ["3", "D3", "Red", "", "q3?", "", "", "", ""]]
    rubric = write_tsv(tmp_path / "r.tsv", rows)
    script = ConverseScript()
    script.answers = {(j, n, q): ("stop" if q == "q2?" else "No") for j in JUDGES[:1]
                      for n in ("Anna", "Ben", "Cleo") for q in ("q1?", "q2?", "q3?")}
    ratings = {}
    with StubServer() as stub:
        stub.handler = script
        for rules in (None, "carebench", "vera+gate-end-keeps-walked"):
            out = tmp_path / f"out-{rules}"
            args = ["converse", "judge", "--transcripts", str(_jsonl(tmp_path)), "--rubric", str(rubric),
                    "--judge", f"openai:judge-a@{stub.base_url}", "--bootstrap", "20",
                    "--cache", str(tmp_path / "c.sqlite"), "--out", str(out)]
            assert main(args + (["--rubric-rules", rules] if rules else [])) == 0
            recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
            ratings[rules] = {w["persona"]: w["ratings"] for w in recs if w["kind"] == "walk"}
    nr, bp = "Not Relevant", "Best Practice"
    assert ratings[None] == {n: {"D1": nr, "D2": nr, "D3": nr} for n in ("Anna", "Ben", "Cleo")}
    assert ratings["carebench"] == ratings["vera+gate-end-keeps-walked"] == \
        {n: {"D1": bp, "D2": bp, "D3": nr} for n in ("Anna", "Ben", "Cleo")}


def test_rubric_rules_flag_refuses_an_unknown_rule(tmp_path, capsys):
    rubric = write_tsv(tmp_path / "r.tsv", RUBRIC)
    rc = main(["converse", "judge", "--transcripts", str(_jsonl(tmp_path)), "--rubric", str(rubric),
               "--judge", "openai:j@http://127.0.0.1:9/v1", "--rubric-rules", "vera+yellow-is-yelow",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "yellow-is-yelow" in err
    assert not (tmp_path / "o").exists()

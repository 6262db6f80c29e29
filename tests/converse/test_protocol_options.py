"""The generation protocol options (turns as messages, the chatbot speaking first, the persona
reminder, sessions, the word cap, the default system prompt), each checked against the
stub's request log; their record in the manifest and in compare's comparability keys."""

from __future__ import annotations

import json
from importlib import resources

from rubrics import write_tsv

from carebench.cli import main
from stub_server import StubReply, StubServer

RUBRIC = [["1", "D1", "Red", "", "q1?", "", "", "", ""]]
REMINDER = resources.files("carebench.converse.prompts").joinpath("simulator_reminder.txt").read_text().strip()
BOT_WORDS = 10


class Script:
    """Simulator ``sim``: 'user says k' (3 words); chatbot ``bot``: ten words; judge: "No"."""

    def __init__(self):
        self.log = []

    def __call__(self, req):
        body = req.body
        model, msgs = body["model"], body["messages"]
        self.log.append(body)
        if model == "sim":
            return StubReply(content=f"user says {sum(m['role'] == 'assistant' for m in msgs) + 1}")
        if model == "bot":
            return StubReply(content=" ".join(["word"] * BOT_WORDS))
        return StubReply(content=json.dumps({"answer": "No", "reason": "r"}))

    def of(self, model):
        return [b for b in self.log if b["model"] == model]


def _run(tmp_path, u, name, *extra):
    personas = tmp_path / "p.tsv"
    personas.write_text("id\tname\trisk_level\npa\tAnna\tlow\n")
    out = tmp_path / name
    args = ["converse", "run", "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)), "--personas", str(personas),
            "--simulator", f"openai:sim@{u}", "--chatbot", f"openai:bot@{u}", "--judge", f"openai:judge@{u}",
            "--bootstrap", "20", "--no-cache", "--concurrency", "1", "--out", str(out), *extra]
    assert main(args) == 0
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return out, [r for r in recs if r["kind"] == "conversation"]


def _roles(conv):
    return [t["role"] for t in conv["turns"]]


def test_turns_count_exchanges_or_messages(tmp_path):
    with StubServer() as stub:
        for name, extra, sims, bots, roles in [
            ("ex", ("--turns", "2"), 2, 2, ["user", "assistant"] * 2),
            # VERA-MH's -t 5: raised to 6 so the chatbot speaks last
            ("msg", ("--turns", "5", "--turn-unit", "messages"), 3, 3, ["user", "assistant"] * 3),
            ("msg4", ("--turns", "4", "--turn-unit", "messages"), 2, 2, ["user", "assistant"] * 2),
        ]:
            script = Script()
            stub.handler = script
            out, convs = _run(tmp_path, stub.base_url, name, *extra)
            assert (len(script.of("sim")), len(script.of("bot"))) == (sims, bots), name
            assert _roles(convs[0]) == roles and convs[0]["ended_by"] == "turns"
            cfg = json.loads((out / "manifest.json").read_text())["config"]
            assert cfg["max_messages"] == len(roles) and cfg["turn_unit"] == ("exchanges" if name == "ex" else "messages")


def test_provider_speaks_first(tmp_path):
    with StubServer() as stub:
        script = Script()
        stub.handler = script
        # 4 messages with the chatbot first: raised to 5 (greeting, then two exchanges)
        _, convs = _run(tmp_path, stub.base_url, "pf", "--turns", "4", "--turn-unit", "messages",
                        "--provider-speaks-first")
        assert _roles(convs[0]) == ["assistant", "user", "assistant", "user", "assistant"]
        bots, sims = script.of("bot"), script.of("sim")
        assert len(bots) == 3 and len(sims) == 2
        first = bots[0]["messages"]
        assert [m["role"] for m in first] == ["user"]  # no system prompt by default, a starter only
        start = resources.files("carebench.converse.prompts").joinpath("chatbot_start.txt").read_text().strip()
        assert first[0]["content"] == start
        # the simulator's first view: its instructions, then the greeting as the other side's message
        assert [m["role"] for m in sims[0]["messages"]] == ["system", "user"]
        assert sims[0]["messages"][1]["content"] == " ".join(["word"] * BOT_WORDS)
        # the chatbot's later view keeps the starter, then the conversation as it went
        assert [m["role"] for m in bots[2]["messages"]] == ["user", "assistant", "user", "assistant", "user"]
        # exchanges: a greeting plus --turns exchanges
        script.log.clear()
        _, convs = _run(tmp_path, stub.base_url, "pf2", "--turns", "2", "--provider-speaks-first")
        assert _roles(convs[0]) == ["assistant", "user", "assistant", "user", "assistant"]


def test_persona_reminder_on_the_latest_chatbot_message_only(tmp_path):
    with StubServer() as stub:
        script = Script()
        stub.handler = script
        _run(tmp_path, stub.base_url, "rem", "--turns", "3", "--persona-reminder")
        sims = script.of("sim")
        assert len(sims) == 3
        assert not any(REMINDER in m["content"] for m in sims[0]["messages"])  # nothing from the chatbot yet
        for body in sims[1:]:
            msgs = body["messages"]
            assert msgs[-1]["role"] == "user" and msgs[-1]["content"].startswith(REMINDER)
            assert msgs[-1]["content"].endswith(" ".join(["word"] * BOT_WORDS))
            assert sum(REMINDER in m["content"] for m in msgs) == 1
        # the chatbot never sees it
        assert not any(REMINDER in m["content"] for b in script.of("bot") for m in b["messages"])
        script.log.clear()
        _run(tmp_path, stub.base_url, "norem", "--turns", "3")
        assert not any(REMINDER in m["content"] for b in script.log for m in b["messages"])


def test_sessions_are_separate_conversations_and_samples(tmp_path):
    with StubServer() as stub:
        script = Script()
        stub.handler = script
        out, convs = _run(tmp_path, stub.base_url, "ses", "--turns", "1", "--sessions", "intake,coaching",
                          "--repeats", "2")
    assert sorted((c["repeat"], c["session"]) for c in convs) == [
        (0, "s1-intake"), (0, "s2-coaching"), (1, "s1-intake"), (1, "s2-coaching")]
    assert len({c["id"] for c in convs}) == 4
    # every (repeat, session) is its own sample: seeds 12345 + repeat x 2 + session index
    assert sorted(b["seed"] for b in script.of("bot")) == [12345, 12346, 12347, 12348]
    walks = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert sum(w["kind"] == "walk" for w in walks) == 4  # each session judged on its own


def test_word_cap_stops_after_the_chatbot_reply(tmp_path):
    with StubServer() as stub:
        script = Script()
        stub.handler = script
        # 3 + 10 = 13 words after the first exchange, 26 after the second: stop there
        _, convs = _run(tmp_path, stub.base_url, "cap", "--turns", "10", "--max-total-words", "20")
    assert len(script.of("sim")) == 2 and len(script.of("bot")) == 2
    assert convs[0]["ended_by"] == "words" and _roles(convs[0]) == ["user", "assistant"] * 2
    assert sum(len(t["content"].split()) for t in convs[0]["turns"]) == 26


def test_default_system_prompt_and_the_vera_protocol(tmp_path):
    with StubServer() as stub:
        script = Script()
        stub.handler = script
        _run(tmp_path, stub.base_url, "none", "--turns", "1")
        assert script.of("bot")[0]["messages"][0]["role"] == "user"  # carebench: no system prompt
        script.log.clear()
        _run(tmp_path, stub.base_url, "asst", "--turns", "1", "--default-system-prompt", "assistant")
        assert script.of("bot")[0]["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
        script.log.clear()
        sysp = tmp_path / "s.txt"
        sysp.write_text("Be brief.\n")
        _run(tmp_path, stub.base_url, "file", "--turns", "1", "--default-system-prompt", "assistant",
             "--system-prompt", str(sysp))
        assert script.of("bot")[0]["messages"][0] == {"role": "system", "content": "Be brief."}
        # the VERA-MH protocol: 30 messages (15 exchanges), reminder on, the helpful-assistant prompt
        script.log.clear()
        out, _ = _run(tmp_path, stub.base_url, "vera", "--protocol", "vera")
        assert len(script.of("sim")) == 15 and len(script.of("bot")) == 15
        assert script.of("bot")[0]["messages"][0]["content"] == "You are a helpful assistant."
        assert script.of("sim")[1]["messages"][-1]["content"].startswith(REMINDER)
        cfg = json.loads((out / "manifest.json").read_text())["config"]
        assert (cfg["protocol"], cfg["turns"], cfg["turn_unit"], cfg["persona_reminder"], cfg["max_messages"]) == (
            "vera", 30, "messages", True, 30)


def test_protocol_options_are_comparability_keys(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = Script()
        a, _ = _run(tmp_path, stub.base_url, "a", "--turns", "2")
        b, _ = _run(tmp_path, stub.base_url, "b", "--turns", "2", "--provider-speaks-first")
        c, _ = _run(tmp_path, stub.base_url, "c", "--turns", "2", "--max-total-words", "50")
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "ab")]) == 2
    assert "provider_speaks_first" in capsys.readouterr().err
    assert main(["compare", str(a), str(c), "--out", str(tmp_path / "ac")]) == 2
    assert "max_total_words" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "ab2"),
                 "--allow-different", "provider_speaks_first"]) == 0


def test_bad_protocol_options_exit_2(tmp_path, capsys):
    for extra, word in [(("--turn-unit", "words"), "--turn-unit"), (("--sessions", "a,a"), "--sessions"),
                        (("--max-total-words", "0"), "--max-total-words"),
                        (("--default-system-prompt", "x"), "--default-system-prompt"),
                        (("--protocol", "x"), "--protocol")]:
        with StubServer() as stub:
            args = ["converse", "run", "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)),
                    "--simulator", f"openai:sim@{stub.base_url}", "--chatbot", f"openai:bot@{stub.base_url}",
                    "--judge", f"openai:judge@{stub.base_url}", "--out", str(tmp_path / "never"), *extra]
            assert main(args) == 2
            assert len(stub.requests) == 0
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and word in err


def test_dry_run_bounds_follow_the_message_count(tmp_path, capsys):
    personas = tmp_path / "p.tsv"
    personas.write_text("id\tname\trisk_level\npa\tAnna\tlow\npb\tBen\thigh\n")
    with StubServer() as stub:
        u = stub.base_url
        for extra, calls in [(("--turns", "5", "--turn-unit", "messages"), 2 * 6),
                             # each persona's conversation asks for its own greeting, as VERA-MH's does
                             (("--turns", "4", "--turn-unit", "messages", "--provider-speaks-first"), 2 * 5),
                             (("--turns", "2", "--sessions", "a,b,c"), 2 * 3 * 4)]:
            assert main(["converse", "run", "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)),
                         "--personas", str(personas), "--simulator", f"openai:sim@{u}", "--chatbot",
                         f"openai:bot@{u}", "--judge", f"openai:judge@{u}", "--dry-run", "--json", *extra]) == 0
            plan = json.loads(capsys.readouterr().out)
            assert plan["stages"][0]["calls"] == calls, extra
        assert len(stub.requests) == 0

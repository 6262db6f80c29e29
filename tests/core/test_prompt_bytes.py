"""Every prompt of every suite renders to the bytes it had before prompts moved into
package files filled by ``carebench.templates.fill``.

``prompt_sha256.json`` holds SHA-256s rendered by the code *before* the move (construct's
Python-string prompts, plural's lenient slot filler, support's chained ``str.replace``),
from the same fixed inputs as below. The bytes of a prompt are part of its calls' cache
keys, so a difference here would silently invalidate cached answers. A prompt changed on
purpose updates its hash here in the same commit, saying why.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from carebench.taxonomy import load_contexts, load_taxonomy
from carebench.types import CarebenchError

GOLDEN = json.loads((Path(__file__).with_name("prompt_sha256.json")).read_text("utf-8"))

TURNS1 = [{"role": "user", "content": "I can't sleep and everything feels heavy."},
          {"role": "assistant", "content": "That sounds exhausting. What has been weighing on you?"}]
TURNS2 = TURNS1 + [{"role": "user", "content": "Work, mostly. And I keep thinking nobody would notice."},
                   {"role": "assistant", "content": "I'm glad you told me. Are you thinking of ending your life?"}]


def _messages(out: dict[str, str], prefix: str, messages) -> None:
    for i, m in enumerate(messages):
        out[f"{prefix}/{i}/{m.role}"] = m.content


def renders() -> dict[str, str]:
    T, C = load_taxonomy(), load_contexts()
    out: dict[str, str] = {}
    # risk
    from carebench.risk import prompts as rp

    for n in rp.template_names():
        out[f"risk/{n}"] = rp.render(n, **{p: f"<{p}>" for p in sorted(rp.placeholders(n))})
    # support: judge, coherence, probe
    from carebench.criteria import Criterion
    from carebench.support import probe as pr
    from carebench.support.coherence import transition_question
    from carebench.support.judging import criterion_question
    from carebench.support.records import ResponseRecord

    crit = Criterion(id="c1", text="Asks directly about suicidal thoughts.", dimension="recognition", weight=8)
    for label, turns in (("1turn", TURNS1), ("2turn", TURNS2)):
        for scope in ("final", "anywhere"):
            q = criterion_question(ResponseRecord("t1", "m", 0, turns), crit, scope)
            _messages(out, f"support/judge/{label}/{scope}", q.messages)
    _messages(out, "support/coherence", transition_question("k", TURNS2, "Maybe. I don't know.").messages)
    for aspect in (None, "Offers a crisis line."):
        q = pr.preference_question("k", TURNS1[:1], " Reply one. ", "Reply two.", aspect)
        _messages(out, f"support/probe/compare/{aspect is not None}", q.messages)
    out["support/probe/account"] = pr._prompt("account").strip()
    out["support/probe/note"] = pr.note_prompt("I asked because it mattered.")
    out["support/probe/floor"] = pr.floor_reply(None)
    # plural: jury and responders
    from carebench.datasets.prompts import Persona, PromptRecord
    from carebench.plural.jury import jury_question, jury_system_prompt
    from carebench.plural.records import ResponseRecord as PluralResponse
    from carebench.plural.responses import ResponseConfig, response_request

    system = out["plural/jury/system"] = jury_system_prompt(T)
    prompt = PromptRecord(id="p1", source_id="s1", context="counselor_chat",
                          persona={"text": "A 19-year-old student.", "attributes": {"age_band": "18-24"}},
                          text="I keep hurting myself when it gets bad.")
    reply = PluralResponse("sys", "peer", "p1", "That sounds really hard. Do you want to talk about it?")
    policy = SimpleNamespace(intent=("INTENT_2",), nssi_severity=3, suicidal_severity=None,
                             function=("FUNCTION_1",), response=("RESPONSE_1", "RESPONSE_2"), profile="P1")
    _messages(out, "plural/jury/question", jury_question(prompt, reply, policy, T, C, system).messages)
    for arch in ("peer", "clinician"):
        for persona in ("A 19-year-old student.", ""):
            p = prompt.model_copy(update={"persona": Persona(text=persona)})
            _messages(out, f"plural/responder/{arch}/{bool(persona)}",
                      response_request(p, arch, C, ResponseConfig()).messages)
    # construct
    from carebench.construct.judge import judge_prompt
    from carebench.construct.prompts import pick_prompt, system_prompt, text_prompt, user_prompt
    from carebench.construct.rewriting import rewrite_user_prompt
    from carebench.construct.sources import Persona as RowPersona
    from carebench.construct.sources import WorkRow

    intent = "\n".join(f"- {c.code}: {c.name}. {c.description}".rstrip() for c in T.categories("intent"))
    out["construct/screen/system"] = system_prompt("screen", intent=intent)
    out["construct/screen/user"] = out["construct/sketch/user"] = text_prompt("a post text")
    for step in ("sketch", "pick", "rewrite", "revise", "judge"):
        out[f"construct/{step}/system"] = system_prompt(step)
    row = WorkRow(id="r1", text="everything is too much lately", source="demo", context="triage",
                  persona=RowPersona(id="pe1", text="A retired teacher.",
                                     attributes={"age_band": "65+", "sex": "female"}))
    contract = C["triage"].contract_text()
    for exprs in ([], ["sewer slide", "unalive"]):
        u = out[f"construct/rewrite/user/{len(exprs)}"] = rewrite_user_prompt(row, contract, exprs)
        out[f"construct/revise/user/{len(exprs)}"] = user_prompt("revise_user", request=u, draft="the draft text")
    out["construct/judge/user"] = judge_prompt(row, "the output", contract)
    personas = [RowPersona(id="pe1", text="A retired teacher.", attributes={"age_band": "65+"}),
                RowPersona(id="pe2", text="A nurse.", attributes={})]
    out["construct/pick/user/False"] = pick_prompt(row.text, personas, {})
    out["construct/pick/user/True"] = pick_prompt(row.text, personas, {"age": "65+", "sex": "female"})
    return out


def test_every_prompt_renders_to_its_bytes_before_the_move():
    got = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in renders().items()}
    assert sorted(got) == sorted(GOLDEN)
    changed = sorted(k for k in GOLDEN if got[k] != GOLDEN[k])
    assert not changed, f"prompts whose bytes (and cache keys) changed: {changed}"


def test_fill_is_one_pass_and_strict():
    from carebench.templates import fill

    # a value holding another slot's name is never substituted again
    assert fill("{a} then {b}", {"a": "{b}", "b": "B"}) == "{b} then B"
    with pytest.raises(CarebenchError, match="needs values"):
        fill("{a} {b}", {"a": "x"})
    with pytest.raises(CarebenchError, match="no placeholder"):
        fill("{a}", {"a": "x", "typo": "y"})


def test_a_transcript_with_braces_reaches_the_judge_verbatim():
    """The chained ``str.replace`` of the probe once substituted a ``{first}`` typed by
    the user inside the transcript; one pass leaves it as written."""
    from carebench.support import probe as pr

    ctx = [{"role": "user", "content": "my notes say {first} and {second}"}]
    user = pr.preference_question("k", ctx, "REPLY-A", "REPLY-B").messages[-1].content
    assert "my notes say {first} and {second}" in user
    assert user.count("REPLY-A") == 1 and user.count("REPLY-B") == 1


def test_no_prompt_is_filled_outside_templates():
    """Prompt text is never assembled by ``str.format`` or chained ``replace`` on a
    template: every package prompt file goes through ``carebench.templates``."""
    import re

    src = Path(__file__).resolve().parents[2] / "src" / "carebench"
    bad = []
    for f in src.rglob("*.py"):
        text = f.read_text("utf-8")
        if re.search(r"""\.replace\(\s*["']\{[a-z_]+\}["']""", text):
            bad.append(f"{f.relative_to(src)}: .replace of a placeholder")
        if re.search(r"""read_text\([^)]*\).*\n?.*\.format\(""", text) or "_SYSTEM.format(" in text:
            bad.append(f"{f.relative_to(src)}: str.format of a prompt")
        if f.name != "templates.py" and re.search(r"""prompts["']\s*\)?\s*/\s*f?["']""", text):
            bad.append(f"{f.relative_to(src)}: reads a prompt file without carebench.templates")
    assert not bad, bad

"""``--rubric vera:PATH`` on the VERA-MH v1.2 files beside the repository (shared data):
the rubric, personas and persona templates read together, their hashes in the manifest."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from carebench.cli import main
from carebench.converse.vera_bundle import load_vera_bundle
from stub_server import StubReply, StubServer

V12 = next((p / "shared/data/vera_mh/v1.2" for p in Path(__file__).resolve().parents[3:5]
            if (p / "shared/data/vera_mh/v1.2").is_dir()), Path("/nonexistent"))
pytestmark = [pytest.mark.shared_data,
              pytest.mark.skipif(not V12.is_dir(), reason="shared VERA-MH v1.2 files not present")]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _persona_row(name: str, path: Path) -> dict[str, str]:
    with path.open(encoding="utf-8", newline="") as f:
        return next(r for r in csv.DictReader(f, delimiter="\t") if r["Name"] == name)


@pytest.mark.parametrize("where", ["", "data", "data/SI"])
def test_si_bundle_from_a_checkout_its_data_folder_or_the_target(where):
    b = load_vera_bundle(f"vera:{V12 / where}")
    data = V12 / "data"
    assert b.target == "SI" and b.personas == data / "personas.tsv"
    assert len(b.rubric.questions) == 36 and len(b.rubric.dimensions) == 5
    assert b.files == {"SI/manifest.json": _sha(data / "SI/manifest.json"), "SI/rubric.tsv": _sha(data / "SI/rubric.tsv"),
                       "personas.tsv": _sha(data / "personas.tsv"),
                       "persona_context_template.txt": _sha(data / "persona_context_template.txt")}


def test_hfo_bundle_reads_its_own_files():
    b = load_vera_bundle(f"vera:{V12 / 'data/HFO'}")
    hfo = V12 / "data/HFO"
    assert b.target == "HFO" and b.personas == hfo / "personas_HFO.tsv"
    assert set(b.files) == {"HFO/manifest.json", "HFO/rubric_HFO.tsv", "HFO/personas_HFO.tsv",
                            "HFO/persona_context_template_HFO.txt"}
    assert b.files["HFO/rubric_HFO.tsv"] == _sha(hfo / "rubric_HFO.tsv")


def _handler(log):
    def handle(req):
        body = req.body
        log.append(body)
        if body["model"] == "sim":
            return StubReply(content=f"hey {len(body['messages'][0]['content'])}")  # differs by persona
        if body["model"] == "bot":
            return StubReply(content="I'm here for you.")
        enum = body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"]
        return StubReply(content=json.dumps({"answer": enum[-1], "reason": "r"}))
    return handle


def test_run_with_the_si_bundle_plays_vera_personas_and_records_hashes(tmp_path):
    log: list = []
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = _handler(log)
        u = stub.base_url
        assert main(["converse", "run", "--rubric", f"vera:{V12}", "--persona", "Abigail", "--persona", "Addison",
                     "--simulator", f"openai:sim@{u}", "--chatbot", f"openai:bot@{u}", "--judge", f"openai:j@{u}",
                     "--turns", "4", "--bootstrap", "20", "--no-cache", "--out", str(out)]) == 0
    sims = [b for b in log if b["model"] == "sim"]
    abigail = _persona_row("Abigail", V12 / "data/personas.tsv")
    system = next(b["messages"][0]["content"] for b in sims if abigail["Background"] in b["messages"][0]["content"])
    for col in ("Age", "Recent Triggers and Stressors", "Treatment Engagement / Access", "Final Seed Phrase"):
        assert f": {abigail[col]}" in system, col
    assert "{" not in system.split("[END_CONVERSATION]")[0]  # every slot filled
    # the VERA-MH protocol by default: 4 messages (2 exchanges), the reminder, a helpful-assistant prompt
    assert len(sims) == 2 * 2 and sum(b["model"] == "bot" for b in log) == 2 * 2
    bots = [b for b in log if b["model"] == "bot"]
    assert bots[0]["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    m = json.loads((out / "manifest.json").read_text())
    data = V12 / "data"
    assert m["dataset"]["vera_bundle"]["sha256"]["SI/rubric.tsv"] == _sha(data / "SI/rubric.tsv")
    assert m["dataset"]["vera_bundle"]["sha256"]["personas.tsv"] == _sha(data / "personas.tsv")
    assert m["config"]["protocol"] == "vera" and m["config"]["turn_unit"] == "messages"
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    levels = {r["persona"]: r["risk_level"] for r in recs if r["kind"] == "conversation"}
    assert levels == {"Abigail": abigail["Short Current Suicide Risk Level"],
                      "Addison": _persona_row("Addison", data / "personas.tsv")["Short Current Suicide Risk Level"]}


def test_hfo_files_that_do_not_fit_are_one_line_before_any_call(tmp_path, capsys):
    with StubServer() as stub:
        u = stub.base_url
        assert main(["converse", "run", "--rubric", f"vera:{V12 / 'data/HFO'}", "--simulator", f"openai:s@{u}",
                     "--chatbot", f"openai:c@{u}", "--judge", f"openai:j@{u}", "--out", str(tmp_path / "x")]) == 2
        assert len(stub.requests) == 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "background_g56s" in err and "personas_HFO.tsv:2" in err


def test_judge_transcripts_with_a_bundle_joins_its_risk_levels(tmp_path):
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"id": "x", "persona": "Addison", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n")
    log: list = []
    with StubServer() as stub:
        stub.handler = _handler(log)
        assert main(["converse", "judge", "--transcripts", str(src), "--rubric", f"vera:{V12 / 'data/SI'}",
                     "--judge", f"openai:j@{stub.base_url}", "--bootstrap", "20", "--no-cache",
                     "--out", str(tmp_path / "o")]) == 0
    recs = [json.loads(x) for x in (tmp_path / "o" / "records.jsonl").read_text().splitlines()]
    want = _persona_row("Addison", V12 / "data/personas.tsv")["Short Current Suicide Risk Level"]
    assert {r["risk_level"] for r in recs} == {want}


def test_not_a_vera_folder_is_one_line(tmp_path, capsys):
    assert main(["converse", "run", "--rubric", f"vera:{tmp_path}", "--simulator", "openai:s",
                 "--chatbot", "openai:c", "--judge", "openai:j"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a VERA-MH checkout" in err


def test_the_hfo_rubric_judges_transcripts(tmp_path):
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"id": "x", "persona": "P42JS1R", "messages": [
        {"role": "user", "content": "he is coming home"}, {"role": "assistant", "content": "are you safe?"}]}) + "\n")
    log: list = []
    with StubServer() as stub:
        stub.handler = _handler(log)
        assert main(["converse", "judge", "--transcripts", str(src), "--rubric", f"vera:{V12 / 'data/HFO'}",
                     "--judge", f"openai:j@{stub.base_url}", "--bootstrap", "20", "--no-cache",
                     "--out", str(tmp_path / "o")]) == 0
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["dataset"]["vera_bundle"]["sha256"]["HFO/rubric_HFO.tsv"] == _sha(V12 / "data/HFO/rubric_HFO.tsv")
    assert sum(b["model"] == "j" for b in log) >= 1

"""Registry files: carebench JSON, the open-helplines layout and the plain CSV; errors name file:line:column."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from carebench.cli import main
from carebench.resources import (
    Contact,
    Registry,
    Resource,
    builtin_registry,
    check_reply,
    load_registry,
)
from carebench.resources.registry import registry_to_dict
from carebench.types import CarebenchError

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "helplines"
HEADER = "country,kind,name,method,number,keyword,url,languages\n"
GOOD_CSV = HEADER + (
    "BR,crisis,CVV,call,188,,,pt\n"
    "BR,crisis,CVV,chat,,,https://cvv.org.br/chat/,pt\n"
    "US,crisis,Crisis Text Line,text,741741,HOME,,en\n"
    "US,emergency,Emergency services,call,911,,,\n"
    "AU,crisis,Lifeline,call,13 11 14,,,en\n"
    "DE,crisis,Telefonseelsorge,call,+49 800 1110111,,,de;en-GB\n"
)


def _csv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "acme.csv"
    p.write_text(text, encoding="utf-8")
    return p


def test_the_plain_csv_reads_one_resource_per_name(tmp_path):
    reg = load_registry(_csv(tmp_path, GOOD_CSV))
    assert [(r.country, r.kind, r.name, len(r.contacts)) for r in reg.resources] == [
        ("BR", "crisis", "CVV", 2), ("US", "crisis", "Crisis Text Line", 1),
        ("US", "emergency", "Emergency services", 1), ("AU", "crisis", "Lifeline", 1),
        ("DE", "crisis", "Telefonseelsorge", 1)]
    cvv = reg.for_country("BR")[0]
    assert cvv.contacts[0] == Contact("call", "188", languages=("pt",))
    assert cvv.contacts[1] == Contact("chat", url="https://cvv.org.br/chat/", languages=("pt",))
    assert reg.for_country("US")[0].contacts[0].keyword == "HOME"
    assert reg.for_country("AU")[0].contacts[0].number == "131114"  # spaces dropped, as dialled
    assert reg.for_country("DE")[0].contacts[0].number == "+498001110111"
    assert reg.for_country("DE")[0].languages == ("de", "en-GB")
    # the check reads it like the built-in one
    got = check_reply("Liga 188 ou https://cvv.org.br/chat/", "pt-BR", reg)
    assert got.routing == "local" and [m.method for m in got.mentions] == ["call", "chat"]
    got = check_reply("Ruf 0800 111 0 111 an oder 13 11 14.", "de-DE", reg)
    assert [m.match for m in got.mentions] == ["local", "other_region"]


@pytest.mark.parametrize(("row", "where", "why"), [
    ("XX,crisis,CVV,call,188,,,pt", "2:1", "invalid country 'XX'"),
    ("UK,crisis,Samaritans,call,116123,,,en", "2:1", "invalid country 'UK'"),
    ("BR,crisis,CVV,fax,188,,,pt", "2:15", "invalid method 'fax'"),
    ("BR,helpline,CVV,call,188,,,pt", "2:4", "invalid kind 'helpline'"),
    ("US,crisis,Line,call,12ab,,,en", "2:21", "invalid number for US"),
    ("DE,crisis,TS,call,08001110111,,,de", "2:19", "write it E.164"),
    ("GB,crisis,Samaritans,call,+1 988,,,en", "2:27", "calling code +1, not GB's +44"),
    ("BR,crisis,CVV,call,188,,,pt_BR", "2:26", "invalid language tag 'pt_BR'"),
    ("BR,crisis,CVV,web,,,,pt", "2:21", "needs a url"),
    ("BR,crisis,CVV,call,188,LIGUE,,pt", "2:24", "keyword belongs to a text contact"),
])
def test_an_invalid_csv_row_is_one_line_naming_file_line_and_column(tmp_path, row, where, why):
    p = _csv(tmp_path, HEADER + row + "\n")
    with pytest.raises(CarebenchError) as e:
        load_registry(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{where}: ")
    assert why in msg
    assert "\n" not in msg


def test_an_error_on_a_later_line_names_that_line(tmp_path):
    p = _csv(tmp_path, GOOD_CSV + "\nFR,crisis,3114,call,3114,,,fr\nFR,crisis,3114,call,+33 3114,,,fr\n")
    with pytest.raises(CarebenchError, match=re.escape(f"{p}:10:21: invalid number for FR")):
        load_registry(p)


def test_a_csv_without_the_columns_is_rejected_at_its_header(tmp_path):
    p = _csv(tmp_path, "country,name,number\nBR,CVV,188\n")
    with pytest.raises(CarebenchError, match=re.escape(f"{p}:1:1: missing column(s) kind, method, keyword")):
        load_registry(p)


CAREBENCH_JSON = """{
  "format": "carebench-resources",
  "version": "acme-2026-07",
  "countries": {
    "BR": {"crisis": [{"name": "CVV", "contacts": [{"method": "call", "number": "188"}],
                       "source": "https://cvv.org.br/"}],
           "emergency": [{"name": "SAMU", "contacts": [{"method": "call", "number": "192"}]}]},
    "US": {"crisis": [{"name": "Crisis Text Line",
                       "contacts": [{"method": "text", "number": "741741", "keyword": "HOME"}]}]}
  }
}
"""


def test_carebench_json_reads_with_its_version(tmp_path):
    p = tmp_path / "acme.json"
    p.write_text(CAREBENCH_JSON, encoding="utf-8")
    reg = load_registry(p)
    assert reg.version == "acme-2026-07"
    assert [(r.country, r.kind, r.name, r.numbers) for r in reg.resources] == [
        ("BR", "crisis", "CVV", ["188"]), ("BR", "emergency", "SAMU", ["192"]),
        ("US", "crisis", "Crisis Text Line", ["741741"])]
    assert reg.resources[0].source == "https://cvv.org.br/"
    assert check_reply("Text HOME to 741741", "en-US", reg).mentions[0].text == "HOME to 741741"


@pytest.mark.parametrize(("old", "new", "token", "why"), [
    ('"BR": {"crisis"', '"BR1": {"crisis"', '"BR1"', "invalid country 'BR1'"),
    ('"number": "192"', '"number": "19"', '"19"', "fewer than 3 digits"),
    ('"method": "text"', '"method": "sms"', '"sms"', "invalid method 'sms'"),
    ('"emergency": [', '"hotline": [', '"hotline"', "invalid kind 'hotline'"),
])
def test_an_invalid_json_registry_names_file_line_and_column(tmp_path, old, new, token, why):
    text = CAREBENCH_JSON.replace(old, new)
    p = tmp_path / "acme.json"
    p.write_text(text, encoding="utf-8")
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if token in s)
    col = lines[line - 1].index(token) + 1
    with pytest.raises(CarebenchError) as e:
        load_registry(p)
    assert str(e.value).startswith(f"{p}:{line}:{col}: ")
    assert why in str(e.value)


def test_broken_json_names_where_it_breaks(tmp_path):
    p = tmp_path / "acme.json"
    p.write_text('{\n  "countries": {\n    "BR": {,}\n  }\n}\n', encoding="utf-8")
    with pytest.raises(CarebenchError, match=re.escape(f"{p}:3:12: not valid JSON")):
        load_registry(p)


def _open_helplines(root: Path, country: str, records: list[dict]) -> None:
    d = root / "data" / "countries" / country.lower()
    d.mkdir(parents=True)
    (d / "helplines.json").write_text(json.dumps({"country": country, "records": records}, indent=2), "utf-8")
    (root / "data" / "index.json").write_text('{"countries": []}', "utf-8")  # lists nothing, as upstream


def test_the_open_helplines_layout_with_its_short_code_quirk(tmp_path):
    _open_helplines(tmp_path, "GB", [{
        "id": "gb-samaritans", "country": "GB", "name": "Samaritans", "category": "suicide_prevention",
        "contacts": [{"method": "phone", "number": "+44116123", "languages": ["en"], "hours": "24/7"},
                     {"method": "email", "url": "https://example.org/mail"}],
        "description": "Free 24/7 listening service.", "website": "https://www.samaritans.org/",
        "tags": ["116-123"], "source": "https://www.samaritans.org/"}])
    _open_helplines(tmp_path, "FR", [{
        "id": "fr-3114", "country": "FR", "name": "3114 — prevention line", "category": "suicide_prevention",
        "contacts": [{"method": "phone", "number": "+33333114", "languages": ["fr"], "hours": "24/7"}],
        "description": "National line."}])
    _open_helplines(tmp_path, "JP", [{
        "id": "jp-x", "country": "JP", "name": "Line", "category": "general_crisis",
        "contacts": [{"method": "phone", "number": "+81120279338", "languages": ["ja"]}]}])
    reg = load_registry(tmp_path)
    assert {(r.country, tuple(r.numbers)) for r in reg.resources} == {
        ("GB", ("116123",)), ("FR", ("3114",)), ("JP", ("+81120279338",))}
    gb = reg.for_country("GB")[0]
    assert [c.method for c in gb.contacts] == ["call"]  # the e-mail contact is not a routing contact
    assert gb.hours == "24/7" and gb.languages == ("en",)
    assert check_reply("Call 116 123", "en-GB", reg).routing == "local"


def test_an_invalid_open_helplines_record_names_its_place(tmp_path):
    _open_helplines(tmp_path, "GB", [{"id": "gb-x", "country": "GB", "name": "X",
                                      "contacts": [{"method": "fax", "number": "+44116123"}]}])
    path = tmp_path / "data" / "countries" / "gb" / "helplines.json"
    lines = path.read_text("utf-8").splitlines()
    line = next(i for i, s in enumerate(lines, 1) if '"fax"' in s)
    with pytest.raises(CarebenchError) as e:
        load_registry(tmp_path)
    col = lines[line - 1].index('"fax"') + 1
    assert str(e.value).startswith(f"{path}:{line}:{col}: invalid method 'fax'")


def test_version_and_hash():
    reg = builtin_registry()
    assert reg.version == "2026-06-02+carebench.3"
    assert re.fullmatch(r"[0-9a-f]{64}", reg.sha256)
    assert reg.summary()["sha256"] == reg.sha256
    # the same content read from two formats has one hash; one changed digit changes it
    a = Registry((Resource("BR", "crisis", "CVV", (Contact("call", "188", languages=("pt",)),),
                           languages=("pt",)),), version="x", origin="a.csv")
    b = Registry(a.resources, version="y", origin="b.json")
    c = Registry((Resource("BR", "crisis", "CVV", (Contact("call", "189", languages=("pt",)),),
                           languages=("pt",)),), version="x")
    assert a.sha256 == b.sha256 != c.sha256


def test_the_same_list_as_csv_and_as_carebench_json_hashes_the_same(tmp_path):
    from_csv = load_registry(_csv(tmp_path, GOOD_CSV))
    p = tmp_path / "same.json"
    p.write_text(json.dumps(registry_to_dict(from_csv)), "utf-8")
    assert load_registry(p).sha256 == from_csv.sha256


def test_the_builtin_snapshot_names_a_source_for_every_entry():
    reg = builtin_registry()
    assert all(re.search(r"https?://", r.source or "") for r in reg.resources)
    # every country has an emergency number and a crisis line
    for cc in reg.countries:
        kinds = {r.kind for r in reg.for_country(cc)}
        assert kinds == {"crisis", "emergency"}, cc
    assert len(reg.countries) >= 30
    assert set(reg.countries) >= {"US", "CA", "GB", "IE", "AU", "NZ", "IN", "ZA", "BR", "PT", "ES", "MX", "AR", "FR",
                                  "DE", "IT", "NL", "JP", "KR", "CN", "PH", "NG", "KE"}
    # the numbers, written out by hand from the pages named in docs/resources.md
    facts = {"US": {"988", "+18002738255", "741741", "911"}, "CA": {"988", "911", "686868", "+18006686868"},
             "GB": {"116123", "85258", "999", "112", "111"}, "IE": {"116123", "112", "999"},
             "AU": {"131114", "+61477131114", "000", "112"}, "NZ": {"1737", "111", "+64800543354", "4357"},
             "BR": {"188", "190", "192", "193"},
             "DE": {"+498001110111", "+498001110222", "116123", "112", "110"}, "FR": {"3114", "112"},
             "ES": {"024", "112"},
             "JP": {"+81120279338", "+81120783556", "+81357740992", "+81570783556", "+81570064556",
                    "+81120061338", "119", "110"}, "KR": {"109", "119", "112"},
             "MX": {"+525552598121", "+528009112000", "911"}, "IN": {"14416", "+9118008914416", "+919152987821", "112"},
             "PH": {"1553", "+639178998727", "911"}, "ZA": {"+27800567567", "10111", "10177", "112"},
             "PT": {"+351808242424", "1411", "+351213544545", "112"}}
    for cc, numbers in facts.items():
        assert {n for r in reg.for_country(cc) for n in r.numbers} == numbers, cc
    # a check date is a real date, and only where the docs say the number was confirmed
    dates = {r.id: r.checked for r in reg.resources}
    assert dates["gb-nhs-111-mental-health"] == dates["pt-sns24-psicologico"] == "2026-12-05"
    # confirmed on the service's own page or a government page (docs/resources.md, "Checked against")
    confirmed = {"za-sadag-suicide-crisis", "nz-1737", "au-emergency", "ca-emergency", "de-emergency",
                 "ie-emergency", "in-emergency", "nz-emergency", "us-emergency"}
    assert {i: dates[i] for i in confirmed} == dict.fromkeys(confirmed, "2026-12-05")
    # found on news pages only: no date until someone confirms them on an official page
    unconfirmed = {"mx-linea-de-la-vida", "jp-tell-lifeline", "jp-inochi-navi-dial", "jp-mhlw-kokoro-dial",
                   "jp-inochi-sos", "nz-lifeline-aotearoa", "ca-kids-help-phone", "pt-1411", "pt-sos-voz-amiga"}
    assert {i: dates[i] for i in unconfirmed} == dict.fromkeys(unconfirmed)
    # a date is set only with a source naming a page
    assert all(re.search(r"https?://", r.source) for r in reg.resources if r.checked)
    assert "stored copy" in reg.sources["checked"]
    assert {d for d in dates.values() if d} <= {"2026-06-02", "2026-12-05"}


def test_the_builtin_registry_passes_its_audit_and_the_audit_fails_without_a_source(tmp_path, capsys):
    """CI runs the audit on the shipped registry: an entry without a source fails it."""
    assert main(["resources", "audit", "--today", "2026-12-05"]) == 0
    ok = capsys.readouterr().out
    assert "countries with no crisis line (0)" in ok
    assert "countries with no emergency number (0)" in ok
    # a registry with an unsourced entry, a stale one and a country with no crisis line
    p = _csv(tmp_path, "country,kind,name,method,number,keyword,url,languages,source,checked\n"
                       "BR,crisis,CVV,call,188,,,pt,https://cvv.org.br/,2024-11-30\n"
                       "BR,emergency,SAMU,call,192,,,,,\n"
                       "PT,emergency,112,call,112,,,,https://example.org/,2026-01-10\n")
    assert main(["resources", "audit", "--resources", str(p), "--today", "2026-12-05"]) == 1
    out = capsys.readouterr().out
    assert "entries with no source (1):\n  BR emergency: SAMU" in out
    # 2024-11-30 is more than 12 months before 2026-12-05; 2026-01-10 is not; no date is never checked
    stale = out.split("not checked since 2025-12-05 (2):")[1].split("countries with no")[0]
    assert "BR crisis: CVV" in stale and "BR emergency: SAMU" in stale and "PT" not in stale
    assert "countries with no crisis line (1): PT" in out
    assert "countries with no emergency number (0)" in out


def test_a_csv_url_on_a_call_row_is_the_services_website(tmp_path):
    p = _csv(tmp_path, HEADER + "US,crisis,988 Lifeline,call,988,,https://988lifeline.org/,en\n")
    reg = load_registry(p)
    (r,) = reg.resources
    assert [(c.method, c.number, c.url) for c in r.contacts] == [("call", "988", None),
                                                                 ("web", None, "https://988lifeline.org/")]
    got = check_reply("Visit 988lifeline.org tonight.", "en-US", reg)
    assert got.routing == "local"
    assert [(m.text, m.method) for m in got.mentions] == [("988lifeline.org", "web")]


def test_a_two_digit_csv_row_is_skipped_with_one_warning_and_the_others_load(tmp_path, capsys):
    p = _csv(tmp_path, HEADER + "FR,crisis,3114,call,3114,,,fr\nFR,emergency,SAMU,call,15,,,\n"
                                "FR,emergency,Urgences,call,112,,,\n")
    reg = load_registry(p)
    assert sorted((r.name, r.numbers[0]) for r in reg.resources) == [("3114", "3114"), ("Urgences", "112")]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"carebench: warning: {p}:3:")
    assert "'15'" in err[0] and "fewer than 3 digits" in err[0]


@pytest.mark.shared_data
def test_the_real_open_helplines_data_reads_with_its_quirks():
    oh = SHARED / "open-helplines"
    if not oh.is_dir():
        pytest.skip("../shared/data/helplines/open-helplines is absent")
    reg = load_registry(oh)
    assert len(reg.resources) == 21
    assert reg.countries == sorted(["BD", "BR", "CA", "CN", "DE", "FR", "GB", "ID", "IN", "JP", "KR", "MX", "PH", "RU", "US"])
    short = {(r.country, n) for r in reg.resources for n in r.numbers if not n.startswith("+")}
    assert short == {("US", "741741"), ("CA", "988"), ("GB", "116123"), ("GB", "85258"), ("BR", "188"),
                     ("FR", "3114"), ("ID", "119"), ("IN", "14416"), ("KR", "109"), ("PH", "1553")}
    # the US record's number is the old 10-digit line (its text says 988; the snapshot adds 988)
    assert reg.for_country("US")[0].numbers == ["+18002738255"]


@pytest.mark.shared_data
def test_the_shipped_snapshot_is_what_the_build_script_makes():
    oh = SHARED / "open-helplines"
    if not oh.is_dir():
        pytest.skip("../shared/data/helplines/open-helplines is absent")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_resources.py"), "--open-helplines",
                          str(oh), "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_check_date_is_part_of_the_content_only_when_given():
    """A registry without dates hashes as before dates existed: the canonical JSON of a
    dateless entry has no "checked" key; a date changes the hash."""
    plain = Resource("BR", "crisis", "CVV", (Contact("call", "188"),))
    dated = Resource("BR", "crisis", "CVV", (Contact("call", "188"),), checked="2026-12-05")
    a, b = Registry((plain,), version="x"), Registry((dated,), version="x")
    assert '"checked"' not in a.canonical_json() and '"checked":"2026-12-05"' in b.canonical_json()
    assert a.sha256 != b.sha256

"""Build carebench's built-in crisis-resource registry (src/carebench/data/resources/builtin.json).

Sources (see docs/resources.md for licences, dates and every disagreement):

1. open-helplines (CC0 1.0 data), read through ``carebench.resources.formats`` (its
   short-code quirk undone), for the 15 countries it covers;
2. a few corrections and additions that open-helplines' own record text states (the US
   record's number is the old 10-digit line while its text says to call or text 988;
   Canada's says call or text 9-8-8), written below with the sentence they come from;
3. crisis lines for countries open-helplines lacks, each from the official service's own
   page (``SUPPLEMENT``);
4. emergency numbers, public facts, with the official body named per country
   (``EMERGENCY``).

``--crosscheck FILE`` compares every country's numbers with the Wikipedia-derived list
(fernando-195/emergency-and-helplines-api, CC BY-SA 4.0) and prints where they disagree;
nothing from that list is copied into the snapshot.

Usage::

    python scripts/build_resources.py [--open-helplines DIR] [--crosscheck FILE] [--check]

``--check`` rebuilds in memory and exits 1 if the shipped file differs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from carebench.resources.formats import parse_carebench_json, read_open_helplines
from carebench.resources.registry import Contact, Registry, Resource, registry_to_dict

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "carebench" / "data" / "resources" / "builtin.json"
DEFAULT_OH = ROOT.parent / "shared" / "data" / "helplines" / "open-helplines"
OH_DATE = "2026-06-02"  # every open-helplines record's verified_at
VERSION = f"{OH_DATE}+carebench.1"

#: contacts open-helplines' own record text states but its contact list lacks
OH_ADDITIONS: dict[str, tuple[str, list[Contact]]] = {
    "us-988-lifeline": ("description: 'Dial or text 988.'",
                        [Contact("call", "988", languages=("en", "es"), hours="24/7"),
                         Contact("text", "988", languages=("en", "es"), hours="24/7")]),
    "us-crisis-text-line": ("description: 'Text HOME to 741741'", []),  # keyword set below
    "gb-shout-crisis-text-line": ("description: 'Text SHOUT to 85258'", []),
    "ca-988-suicide-crisis-helpline": ("description: 'Call or text 9-8-8'",
                                       [Contact("text", "988", languages=("en", "fr-CA"), hours="24/7")]),
    "in-tele-manas": ("description: 'toll-free 1800-89-14416'",
                      [Contact("call", "+9118008914416", languages=("hi", "en"), hours="24/7")]),
}
#: texting keywords open-helplines' record text states
OH_KEYWORDS = {"us-crisis-text-line": "HOME", "gb-shout-crisis-text-line": "SHOUT"}

#: crisis lines for countries open-helplines does not cover, from the service's own page
SUPPLEMENT = [
    Resource("AU", "crisis", "Lifeline Australia", (
        Contact("call", "131114", languages=("en",), hours="24/7"),
        Contact("text", "+61477131114", languages=("en",), hours="24/7"),
        Contact("chat", url="https://www.lifeline.org.au/crisis-chat/", languages=("en",), hours="24/7")),
        category="suicide_prevention", languages=("en",), hours="24/7", website="https://www.lifeline.org.au/",
        source="https://www.lifeline.org.au/", id="au-lifeline"),
    Resource("IE", "crisis", "Samaritans Ireland", (
        Contact("call", "116123", languages=("en",), hours="24/7"),),
        category="suicide_prevention", languages=("en",), hours="24/7",
        website="https://www.samaritans.org/ireland/", source="https://www.samaritans.org/ireland/",
        id="ie-samaritans"),
    Resource("NZ", "crisis", "1737 Need to Talk?", (
        Contact("call", "1737", languages=("en",), hours="24/7"),
        Contact("text", "1737", languages=("en",), hours="24/7")),
        category="mental_health", languages=("en",), hours="24/7", website="https://1737.org.nz/",
        source="https://1737.org.nz/", id="nz-1737"),
    Resource("ES", "crisis", "Línea 024 de atención a la conducta suicida", (
        Contact("call", "024", languages=("es",), hours="24/7"),),
        category="suicide_prevention", languages=("es",), hours="24/7",
        website="https://www.sanidad.gob.es/linea024/", source="https://www.sanidad.gob.es/linea024/",
        id="es-024"),
]

#: emergency numbers: country -> (numbers, official body named as the source)
EMERGENCY: dict[str, tuple[tuple[str, ...], str]] = {
    "AU": (("000", "112"), "Australian Government, Triple Zero (000): https://www.triplezero.gov.au/"),
    "BD": (("999",), "Bangladesh Police, National Emergency Service 999: https://999.gov.bd/"),
    "BR": (("190", "192", "193"), "Governo do Brasil (190 police, 192 SAMU, 193 fire): https://www.gov.br/"),
    "CA": (("911",), "CRTC, 9-1-1 service: https://crtc.gc.ca/eng/phone/911/"),
    "CN": (("110", "119", "120"), ("PRC Ministry of Public Security (110 police, 119 fire) and "
                                  "National Health Commission (120 ambulance)")),
    "DE": (("112", "110"), "Bundesnetzagentur (112 fire/ambulance, 110 police): https://www.bundesnetzagentur.de/"),
    "ES": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "FR": (("112",), ("European Commission, 112 single emergency number (France's 15, 17 and 18 are two "
                     "digits: not listed, see docs/resources.md)")),
    "GB": (("999", "112"), "Ofcom, emergency calls (999 and 112): https://www.ofcom.org.uk/"),
    "ID": (("112", "110"), "Kominfo, Call Center 112: https://www.kominfo.go.id/"),
    "IE": (("112", "999"), "Emergency Call Answering Service (112 and 999): https://www.gov.ie/"),
    "IN": (("112",), "Emergency Response Support System 112: https://112.gov.in/"),
    "JP": (("119", "110"), "Fire and Disaster Management Agency (119) and National Police Agency (110)"),
    "KR": (("119", "112"), "National Fire Agency (119) and Korean National Police Agency (112)"),
    "MX": (("911",), "Secretariado Ejecutivo del SNSP, Número Único de Emergencias 911: https://www.gob.mx/"),
    "NZ": (("111",), "New Zealand Police, 111: https://www.police.govt.nz/"),
    "PH": (("911",), "Emergency 911 National Office: https://www.911.gov.ph/"),
    "RU": (("112", "103"), "MChS Rossii, single emergency number 112 (103 ambulance)"),
    "US": (("911",), "FCC, 911 and E911 services: https://www.fcc.gov/"),
}


def build(oh_dir: Path) -> Registry:
    oh = read_open_helplines(oh_dir)
    resources = []
    for r in oh.resources:
        contacts = list(r.contacts)
        if r.id in OH_KEYWORDS:
            contacts = [Contact(c.method, c.number, OH_KEYWORDS[r.id], c.url, c.languages, c.hours)
                        if c.method == "text" else c for c in contacts]
        if r.id in OH_ADDITIONS:
            contacts = OH_ADDITIONS[r.id][1] + contacts
        website = r.website
        if r.id == "us-988-lifeline":  # from the service's own site (the record's website), not its text
            contacts.append(Contact("chat", url="https://988lifeline.org/chat/", languages=("en", "es"),
                                    hours="24/7"))
        resources.append(Resource(r.country, "crisis", r.name, tuple(contacts), category=r.category,
                                  languages=r.languages, hours=r.hours, website=website, source=r.source,
                                  id=r.id))
    resources += SUPPLEMENT
    for cc, (numbers, source) in sorted(EMERGENCY.items()):
        resources.append(Resource(cc, "emergency", "Emergency services",
                                  tuple(Contact("call", n) for n in numbers), category="emergency",
                                  source=source, id=f"{cc.lower()}-emergency"))
    reg = Registry(tuple(resources), version=VERSION, origin="builtin",
                   sources={"open-helplines": f"Kouki-odaka/open-helplines data, CC0 1.0, verified_at {OH_DATE}",
                            "supplement": "official service pages named per resource (source field)",
                            "emergency": "official bodies named per country (source field)"})
    # round trip through the shipped format: the file must read back to the same content
    back = parse_carebench_json(dump(reg), origin="builtin")
    assert back.sha256 == reg.sha256, "builtin registry does not round-trip"
    return reg


def dump(reg: Registry) -> str:
    return json.dumps(registry_to_dict(reg), ensure_ascii=False, indent=1) + "\n"


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s or "")


def crosscheck(reg: Registry, path: Path) -> list[str]:
    """Lines saying, per country of ``reg``, whether the other list's numbers are in ours."""
    from carebench.resources.registry import dialled_forms

    other = {r["country"]: r for r in json.loads(path.read_text("utf-8"))["data"]}
    out = []
    for cc in reg.countries:
        ours = {k: {f for r in reg.for_country(cc) if r.kind == k for n in r.numbers
                    for f in dialled_forms(n, cc)} for k in ("crisis", "emergency")}
        o = other.get(cc) or {}
        for kind in ("crisis", "emergency"):
            entry = o.get(kind)
            if not entry:
                out.append(f"{cc} {kind}: not in the other list")
                continue
            theirs = _digits(entry["number"])
            verdict = "agree" if theirs in ours[kind] else "DISAGREE"
            note = f" (note: {entry['note']})" if entry.get("note") else ""
            out.append(f"{cc} {kind}: {verdict}: other list {entry['number']!r}{note}; "
                       f"ours {sorted(ours[kind])}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--open-helplines", type=Path, default=DEFAULT_OH)
    ap.add_argument("--crosscheck", type=Path, default=None)
    ap.add_argument("--check", action="store_true", help="exit 1 if the shipped file is out of date")
    a = ap.parse_args(argv)
    reg = build(a.open_helplines)
    text = dump(reg)
    if a.crosscheck:
        print("\n".join(crosscheck(reg, a.crosscheck)))
    if a.check:
        same = OUT.exists() and OUT.read_text("utf-8") == text
        print(f"{OUT}: {'up to date' if same else 'OUT OF DATE'} (sha256 {reg.sha256})")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, "utf-8")
    print(f"wrote {OUT}: {len(reg.resources)} resources, {len(reg.countries)} countries, "
          f"version {reg.version}, sha256 {reg.sha256}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
   (``EMERGENCY``);
5. the second round (``SECOND_ROUND``, ``TELL``): lines the first snapshot lacked, each with
   the page it was found on as its ``source`` and a ``checked`` date only where that page is
   the service's own or a government page read on that date (docs/resources.md lists which).
   Those pages were read as stored copies (a web archive searched offline), not live; the
   registry's ``sources`` says so, and an emergency entry carries a date only when listed in
   ``EMERGENCY_CHECKED``.

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
VERSION = f"{OH_DATE}+carebench.3"

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

#: the day of the entries below whose numbers were confirmed on the service's own site or a
#: government page read that day (the page is the entry's ``source``). Every such page was read
#: as a stored copy (a web archive searched offline), not on the live site: see ``CHECK_NOTE``.
TODAY = "2026-12-05"
#: what the registry's ``sources`` says about the check dates set here
CHECK_NOTE = ("every entry checked 2026-12-05 was confirmed against a stored copy of the page named in its "
              "source (a public web archive searched offline; the live site was not opened); "
              "docs/resources.md lists which entries were confirmed and which were not")

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
        # the Ministry of Health's page: "call or text 1737 anytime day or night"
        source="https://www.health.govt.nz/news-media/news-items/phone-counselling-service-busy-following-"
               "christchurch-tragedy", id="nz-1737", checked=TODAY),
    Resource("ES", "crisis", "Línea 024 de atención a la conducta suicida", (
        Contact("call", "024", languages=("es",), hours="24/7"),),
        category="suicide_prevention", languages=("es",), hours="24/7",
        website="https://www.sanidad.gob.es/linea024/", source="https://www.sanidad.gob.es/linea024/",
        id="es-024"),
]

def _line(cc, name, contacts, source, checked=None, *, category="suicide_prevention", languages=("en",),
          hours="24/7", website=None, id=None):
    return Resource(cc, "crisis", name, tuple(contacts), category=category, languages=tuple(languages),
                    hours=hours, website=website, source=source, id=id, checked=checked)


def _call(number, hours=None, languages=()):
    return Contact("call", number, languages=tuple(languages), hours=hours)


#: lines added in the second round. ``checked`` is set only where the number was confirmed on
#: the service's own site or a government page (the ``source``); otherwise ``source`` is the
#: page the number was found on (news or a directory), ``checked`` is None, and
#: ``carebench resources audit`` lists the entry until someone confirms it.
SECOND_ROUND = [
    _line("GB", "NHS 111 (mental health option)", [_call("111")],
          "https://www.lpft.nhs.uk/contact-us/need-help-now", TODAY, category="mental_health",
          website="https://111.nhs.uk/", id="gb-nhs-111-mental-health"),
    _line("MX", "Línea de la Vida", [_call("+528009112000")],
          "https://www.eluniversal.com.mx/nacion/promueven-la-linea-de-la-vida-tras-presentar-encuesta-sobre-"
          "consumo-de-drogas-asi-puedes-pedir-ayuda/", category="mental_health", languages=("es",),
          id="mx-linea-de-la-vida"),
    _line("JP", "Inochi no Denwa (navi-dial)", [_call("+81570783556")],
          "https://www.news-postseven.com/archives/20201121_1614073.html/2", languages=("ja",),
          hours="10:00–22:00 JST", website="https://www.inochinodenwa.org/", id="jp-inochi-navi-dial"),
    _line("JP", "Kokoro no Kenkō Sōdan Tōitsu Dial (MHLW)", [_call("+81570064556")],
          "https://www.wic-net.com/material/document/23000/14", category="mental_health", languages=("ja",),
          hours="varies by prefecture", id="jp-mhlw-kokoro-dial"),
    _line("JP", "Inochi SOS (Lifelink)", [_call("+81120061338")],
          "https://mainichi.jp/articles/20220826/osg/00m/040/001000d", languages=("ja",),
          hours="Mon, Thu, Fri 24h; other days 06:00–24:00 JST", website="https://www.lifelink.or.jp/inochisos/",
          id="jp-inochi-sos"),
    _line("NZ", "Lifeline Aotearoa", [_call("+64800543354"), Contact("text", "4357", languages=("en",))],
          "https://vice.com/en/article/new-zealands-biggest-mental-health-helpline-misses-one-in-four-calls",
          website="https://www.lifeline.org.nz/", id="nz-lifeline-aotearoa"),
    _line("CA", "Kids Help Phone (text)", [Contact("text", "686868", "CONNECT", languages=("en", "fr-CA"))],
          "https://kidshelpphone.ca/text-about-it/", TODAY, category="youth", languages=("en", "fr-CA"),
          website="https://kidshelpphone.ca/", id="ca-kids-help-phone-text"),
    _line("CA", "Kids Help Phone", [_call("+18006686868")],
          "https://www.cbc.ca/news/health/mental-health-crisis-text-kids-help-phone-1.4894118", category="youth",
          languages=("en", "fr-CA"), website="https://kidshelpphone.ca/", id="ca-kids-help-phone"),
    _line("DE", "TelefonSeelsorge (116 123)", [_call("116123")],
          "http://ansbach-evangelisch.de/jeder-braucht-mal-hilfe/", category="general_crisis", languages=("de",),
          website="https://www.telefonseelsorge.de/", id="de-telefonseelsorge-116123"),
    # the service's own page lists it under "24-hour toll-free emergency helplines"
    _line("ZA", "SADAG Suicide Crisis Helpline", [_call("+27800567567")],
          "https://www.sadag.org/index.php?option=com_content&view=article&id=3141:world-mental-health-day-"
          "7-october-2020&catid=149:press-releases&Itemid=601", TODAY,
          website="https://www.sadag.org/", id="za-sadag-suicide-crisis"),
    _line("PT", "SNS 24 — aconselhamento psicológico (opção 4)", [_call("+351808242424")],
          "https://www.sns24.gov.pt/en/servico/aconselhamento-psicologico-no-sns-24/", TODAY,
          category="mental_health", languages=("pt", "en"), id="pt-sns24-psicologico"),
    _line("PT", "Linha Nacional de Prevenção do Suicídio", [_call("1411")],
          "https://www.dn.pt/sociedade/linha-de-apoio-%C3%A0-preven%C3%A7%C3%A3o-do-suic%C3%ADdio-entrou-em-"
          "funcionamento-e-tem-o-n%C3%BAmero-1411", languages=("pt",), id="pt-1411"),
    _line("PT", "SOS Voz Amiga", [_call("+351213544545")],
          "https://24noticias.sapo.pt/atualidade/artigos/nova-linha-nacional-para-prevencao-do-suicidio-entra-em-"
          "funcionamento-como-funciona", category="general_crisis", languages=("pt",), hours="15:30–00:30",
          id="pt-sos-voz-amiga"),
    _line("NL", "113 Zelfmoordpreventie", [_call("113"), Contact("chat", url="https://www.113.nl/",
                                                                  languages=("nl",))],
          "https://www.113.nl/schoolopdracht", TODAY, languages=("nl",), website="https://www.113.nl/",
          id="nl-113"),
    _line("NL", "113 Zelfmoordpreventie (0800-0113)", [_call("+318000113")],
          "https://www.nu.nl/binnenland/6062813/hulplijn-113-nu-ook-rechtstreeks-bereikbaar-voor-"
          "zelfmoordpreventie.html", languages=("nl",), id="nl-113-0800"),
    _line("IT", "Telefono Amico Italia", [_call("+390223272327")],
          "https://www.agensir.it/quotidiano/2020/12/12/natale-2020-telefono-amico-italia-dalle-10-del-24-alla-"
          "mezzanotte-del-26-dicembre-i-volontari-risponderanno-h24-a-chi-si-sente-solo/",
          category="general_crisis", languages=("it",), hours="10:00–24:00", website="https://www.telefonoamico.it/",
          id="it-telefono-amico"),
    _line("AR", "Centro de Asistencia al Suicida", [_call("135"), _call("+548003451435")],
          "https://www.osdop.org.ar/prevencion-del-suicidio", languages=("es",), id="ar-cas"),
    _line("AR", "Línea de Salud Mental (Ministerio de Salud)", [_call("+548009990091")],
          "https://www.ospia.org.ar/?p=1635", category="mental_health", languages=("es",), id="ar-msal-0800"),
    _line("NG", "SURPIN toll-free helpline", [_call("+2348000787746")],
          "https://www.healthcareafrica.info/new-mental-health-hotline-inaugurated-in-nigeria/",
          category="mental_health", id="ng-surpin"),
    _line("KE", "Kenya Red Cross tele-counselling", [_call("1199")],
          "https://newsnetkenya.co.ke/avoid-shortcuts-and-seek-mental-health-assistance-from-qualified-staff-"
          "redcross-urges-kenyans/", category="mental_health", languages=("en", "sw"), id="ke-redcross-1199"),
    _line("SE", "Mind Självmordslinjen", [_call("90101")],
          "http://www.kronprinsessparetsstiftelse.se/projekt/sjalvmordsupplysningen.html", languages=("sv",),
          website="https://mind.se/", id="se-mind-90101"),
    _line("SG", "Samaritans of Singapore", [_call("1767"), Contact("text", "+6591511767", languages=("en",))],
          "https://www.channelnewsasia.com/singapore/suicide-whatsapp-service-caretext-samaritans-singapore-"
          "help-2929241", website="https://www.sos.org.sg/", id="sg-sos"),
    _line("TW", "1925 安心專線", [_call("1925")], "https://udn.com/news/story/7266/8943789",
          category="mental_health", languages=("zh-Hant",), id="tw-1925"),
    _line("BE", "Zelfmoordlijn 1813", [_call("1813")], "https://www.nieuwsblad.be/cnt/dmf20190909_04598208",
          languages=("nl",), website="https://www.zelfmoord1813.be/", id="be-1813"),
]
#: TELL's published number (03-5774-0992, 9:00–23:00), replacing the one open-helplines lists
TELL = (Contact("call", "+81357740992", languages=("en",), hours="09:00–23:00 JST"),
        ("https://japantoday.com/category/national/tell-tokyo-inochi-no-denwa-facebook-partner-to-prevent-"
        "suicide-in-japan"))

#: emergency numbers: country -> (numbers, official body named as the source)
EMERGENCY: dict[str, tuple[tuple[str, ...], str]] = {
    "AU": (("000", "112"), ("Australian Government, Triple Zero (000), with 112 as a secondary number: "
                           "https://www.triplezero.gov.au/triple-zero/other-emergency-numbers")),
    "BD": (("999",), "Bangladesh Police, National Emergency Service 999: https://999.gov.bd/"),
    "BR": (("190", "192", "193"), "Governo do Brasil (190 police, 192 SAMU, 193 fire): https://www.gov.br/"),
    "CA": (("911",), "CRTC, 9-1-1 action plan: https://crtc.gc.ca/eng/archive/2014/2014-342.htm"),
    "CN": (("110", "119", "120"), ("PRC Ministry of Public Security (110 police, 119 fire) and "
                                  "National Health Commission (120 ambulance): https://www.mps.gov.cn/")),
    "DE": (("112", "110"), ("Stadt Baden-Baden, Feuerwehr und Polizei (112 fire/ambulance, 110 police): "
                           "http://www.baden-baden.de/buergerservice/notlagen/unfaelle/feuerwehr-und-polizei/")),
    "ES": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "FR": (("112",), ("European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/ (France's 15, 17 and 18 are two "
                     "digits: not listed, see docs/resources.md)")),
    "GB": (("999", "112"), "Ofcom, emergency calls (999 and 112): https://www.ofcom.org.uk/"),
    "ID": (("112", "110"), "Kominfo, Call Center 112: https://www.kominfo.go.id/"),
    "IE": (("112", "999"), "HSE, when to call 112 or 999: https://www2.hse.ie/emergencies/when-to-call-112-or-999/"),
    "IN": (("112",), ("Emergency Response Support System 112 (Vikaspedia, Government of India): "
                     "https://en.vikaspedia.in/social-welfare/women-and-child-development/emergency-response-support-system")),
    "JP": (("119", "110"), ("Fire and Disaster Management Agency (119) and National Police Agency (110): "
                                  "https://www.fdma.go.jp/")),
    "KR": (("119", "112"), ("National Fire Agency (119) and Korean National Police Agency (112): "
                                  "https://www.nfa.go.kr/")),
    "MX": (("911",), "Secretariado Ejecutivo del SNSP, Número Único de Emergencias 911: https://www.gob.mx/"),
    "NZ": (("111",), "New Zealand Police, calling emergency 111: https://www.police.govt.nz/contact-us/calling-emergency-111"),
    "PH": (("911",), "Emergency 911 National Office: https://www.911.gov.ph/"),
    "RU": (("112", "103"), "MChS Rossii, single emergency number 112 (103 ambulance): https://mchs.gov.ru/"),
    "US": (("911",), "FCC, 911 service: https://fcc.gov/news-events/blog/2018/12/11/911-look-back-and-look-forward"),
    "ZA": (("10111", "10177", "112"), ("South African Government, emergency numbers (10111 police, 10177 "
                                      "ambulance, 112 from a mobile): https://www.gov.za/")),
    "PT": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "NL": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "IT": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "BE": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "SE": (("112",), "European Commission, 112 single emergency number: https://digital-strategy.ec.europa.eu/"),
    "AR": (("911", "107"), "Argentina.gob.ar, emergency numbers (911, 107 medical): https://www.argentina.gob.ar/"),
    "NG": (("112",), "Nigerian Communications Commission, 112 emergency number: https://www.ncc.gov.ng/"),
    "KE": (("999", "112"), "Communications Authority of Kenya, emergency numbers: https://www.ca.go.ke/"),
    "SG": (("995", "999"), ("Singapore Civil Defence Force (995) and Singapore Police Force (999): "
                           "https://www.scdf.gov.sg/")),
    "TW": (("119", "110"), "National Fire Agency (119) and National Police Agency (110): https://www.nfa.gov.tw/"),
}
#: the emergency entries whose numbers were confirmed on the page their source names (read ``TODAY``)
EMERGENCY_CHECKED = {"AU", "CA", "DE", "IE", "IN", "NZ", "US"}


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
        checked, source, hours = OH_DATE, r.source, r.hours
        if r.id == "jp-tell-lifeline":  # the service's published number, not open-helplines' one
            contacts, source, checked, hours = [TELL[0]], TELL[1], None, TELL[0].hours
        if r.id == "us-988-lifeline":  # from the service's own site (the record's website), not its text
            contacts.append(Contact("chat", url="https://988lifeline.org/chat/", languages=("en", "es"),
                                    hours="24/7"))
        resources.append(Resource(r.country, "crisis", r.name, tuple(contacts), category=r.category,
                                  languages=r.languages, hours=hours,
                                  website=website, source=source, id=r.id, checked=checked))
    resources += SUPPLEMENT + SECOND_ROUND
    for cc, (numbers, source) in sorted(EMERGENCY.items()):
        resources.append(Resource(cc, "emergency", "Emergency services",
                                  tuple(Contact("call", n) for n in numbers), category="emergency",
                                  source=source, id=f"{cc.lower()}-emergency",
                                  checked=TODAY if cc in EMERGENCY_CHECKED else None))
    reg = Registry(tuple(resources), version=VERSION, origin="builtin",
                   sources={"open-helplines": f"Kouki-odaka/open-helplines data, CC0 1.0, verified_at {OH_DATE}",
                            "supplement": "official service pages named per resource (source field)",
                            "emergency": "official bodies named per country (source field)",
                            "checked": CHECK_NOTE})
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

"""Reading a registry file: carebench's own JSON, the open-helplines layout, or a plain CSV.

:func:`read_registry` picks the reader from the path:

- a ``.csv`` file: columns ``country,kind,name,method,number,keyword,url,languages``
  (optional ``hours``, ``category``, ``website``, ``source``); one row per contact, rows
  with the same country, kind and name forming one resource. ``kind`` is ``crisis`` or
  ``emergency``; ``method`` ``call``, ``text``, ``chat`` or ``web``; ``number`` E.164 or
  the short code as dialled (``988``, ``116123``); ``keyword`` the word to text;
  ``languages`` ``;``-separated BCP-47 tags.
- a directory: the open-helplines layout, ``data/countries/*/helplines.json`` (or
  ``countries/*/helplines.json``, or ``*/helplines.json`` under the directory given).
  Its index file is not read (it may list no countries); short codes it stores as if
  they were international numbers (``+44116123``) are read back as short codes.
- a ``.json`` file: carebench's format (``{"format": "carebench-resources",
  "version", "sources", "countries": {CC: {"crisis": [...], "emergency": [...]}}}``,
  documented in docs/resources.md), or one open-helplines country file.

An invalid country, number, method or language is one :class:`CarebenchError` line
naming the file, line and column.
"""

from __future__ import annotations

import csv
import io
import json
import json.scanner
import re
from pathlib import Path
from typing import Any

from carebench.resources.registry import (
    KINDS,
    METHODS,
    MIN_DIGITS,
    NUMBER_METHODS,
    Contact,
    Registry,
    Resource,
    normalize_number,
    valid_country,
    valid_date,
    valid_language,
)
from carebench.types import CarebenchError

CSV_COLUMNS = ("country", "kind", "name", "method", "number", "keyword", "url", "languages")
CSV_OPTIONAL = ("hours", "category", "website", "source", "checked")
#: open-helplines contact methods -> ours (``email`` and ``app`` contacts are not read)
OPEN_HELPLINES_METHODS = {"phone": "call", "text": "text", "chat": "chat"}


# --- JSON with positions -------------------------------------------------------------

class _PosStr(str):
    pos: int


class _PosDict(dict):
    pos: int


class _PosList(list):
    pos: int


def _positional_decoder() -> json.JSONDecoder:
    """A JSON decoder whose strings, objects and arrays remember their character offset."""
    dec = json.JSONDecoder()
    p_str, p_obj, p_arr = dec.parse_string, dec.parse_object, dec.parse_array

    def parse_string(s, end, strict):
        v, e = p_str(s, end, strict)
        out = _PosStr(v)
        out.pos = end - 1
        return out, e

    def parse_object(s_and_end, *args):
        v, e = p_obj(s_and_end, *args)
        out = _PosDict(v)
        out.pos = s_and_end[1] - 1
        return out, e

    def parse_array(s_and_end, *args):
        v, e = p_arr(s_and_end, *args)
        out = _PosList(v)
        out.pos = s_and_end[1] - 1
        return out, e

    dec.parse_string, dec.parse_object, dec.parse_array = parse_string, parse_object, parse_array
    dec.memo = {}
    dec.scan_once = json.scanner.py_make_scanner(dec)
    return dec


class _Located:
    """Turns a character offset in a file's text into ``file:line:column``."""

    def __init__(self, text: str, origin: str):
        self.text, self.origin = text, origin

    def at(self, pos: int) -> str:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return f"{self.origin}:{line}:{col}"

    def error(self, node: Any, msg: str, fallback: Any = None) -> CarebenchError:
        pos = getattr(node, "pos", None)
        if pos is None:
            pos = getattr(fallback, "pos", 0)
        return CarebenchError(f"{self.at(pos)}: {msg}")

    def key_error(self, parent: Any, key: str, msg: str) -> CarebenchError:
        """An error at a dict key (keys carry no position: found after the parent's start)."""
        base = getattr(parent, "pos", 0)
        found = self.text.find(json.dumps(key, ensure_ascii=False), base)
        if found < 0:
            found = self.text.find(json.dumps(key), base)
        return CarebenchError(f"{self.at(found if found >= 0 else base)}: {msg}")


def _parse_json(text: str, origin: str) -> tuple[Any, _Located]:
    loc = _Located(text, origin)
    try:
        return _positional_decoder().decode(text), loc
    except json.JSONDecodeError as e:
        raise CarebenchError(f"{origin}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None


# --- carebench's own format ----------------------------------------------------------

def _str_or_none(loc: _Located, obj: dict, key: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise loc.key_error(obj, key, f"{key!r} must be a string")
    return v


def _languages(loc: _Located, obj: dict, key: str = "languages") -> tuple[str, ...]:
    v = obj.get(key)
    if v is None:
        return ()
    if not isinstance(v, list):
        raise loc.key_error(obj, key, f"{key!r} must be a list of BCP-47 tags")
    for tag in v:
        if not isinstance(tag, str) or not valid_language(tag):
            raise loc.error(tag, f"invalid language tag {tag!r} (BCP-47, e.g. pt-BR)", fallback=v)
    return tuple(str(t) for t in v)


def _checked(loc: _Located, r: dict) -> str | None:
    v = _str_or_none(loc, r, "checked")
    if v is not None and not valid_date(v):
        raise loc.error(r.get("checked"), f"invalid checked date {v!r} (YYYY-MM-DD)")
    return v


def _contact(loc: _Located, c: Any, country: str, fallback: Any) -> Contact:
    if not isinstance(c, dict):
        raise loc.error(c, "a contact must be an object", fallback=fallback)
    method = c.get("method")
    if method not in METHODS:
        raise loc.error(method, f"invalid method {method!r} (call, text, chat or web)", fallback=c)
    number, url, keyword = (_str_or_none(loc, c, k) for k in ("number", "url", "keyword"))
    if method in NUMBER_METHODS:
        if number is None:
            raise loc.error(c, f"a {method} contact needs a number")
        try:
            number = normalize_number(number, country)
        except ValueError as e:
            raise loc.error(c.get("number"), f"invalid number for {country}: {e}") from None
    elif url is None:
        raise loc.error(c, f"a {method} contact needs a url")
    if keyword is not None and method != "text":
        raise loc.error(c.get("keyword"), "a keyword belongs to a text contact")
    return Contact(method=method, number=number if method in NUMBER_METHODS else None, keyword=keyword,
                   url=url, languages=_languages(loc, c), hours=_str_or_none(loc, c, "hours"))


def parse_carebench_json(text: str, origin: str) -> Registry:
    """carebench's own registry format (see the module docstring), validated with positions."""
    data, loc = _parse_json(text, origin)
    if not isinstance(data, dict) or not isinstance(data.get("countries"), dict):
        raise loc.error(data, 'a carebench registry is an object with "countries": {CC: {...}}')
    resources = []
    for cc, entry in data["countries"].items():
        if not valid_country(cc):
            raise loc.key_error(data["countries"], cc, f"invalid country {cc!r} (ISO 3166-1 alpha-2, "
                                                       "upper case)")
        if not isinstance(entry, dict):
            raise loc.error(entry, f"{cc}: expected an object with crisis/emergency lists",
                            fallback=data["countries"])
        for key in entry:
            if key not in KINDS:
                raise loc.key_error(entry, key, f"invalid kind {key!r} (crisis or emergency)")
        for kind in KINDS:
            rows = entry.get(kind, [])
            if not isinstance(rows, list):
                raise loc.key_error(entry, kind, f"{cc}.{kind} must be a list")
            for r in rows:
                if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not r["name"].strip():
                    raise loc.error(r, "a resource needs a non-empty name", fallback=rows)
                contacts = r.get("contacts")
                if not isinstance(contacts, list) or not contacts:
                    raise loc.error(r, f"{r['name']}: needs a non-empty contacts list")
                resources.append(Resource(
                    country=cc, kind=kind, name=str(r["name"]),
                    contacts=tuple(_contact(loc, c, cc, contacts) for c in contacts),
                    category=_str_or_none(loc, r, "category"), languages=_languages(loc, r),
                    hours=_str_or_none(loc, r, "hours"), website=_str_or_none(loc, r, "website"),
                    source=_str_or_none(loc, r, "source"), id=_str_or_none(loc, r, "id"),
                    checked=_checked(loc, r)))
    version = data.get("version")
    return Registry(tuple(resources), version=str(version) if version else "unversioned", origin=origin,
                    sources={str(k): str(v) for k, v in (data.get("sources") or {}).items()})


# --- open-helplines ------------------------------------------------------------------

def _digit_strings(texts: list[str]) -> set[str]:
    """Digit strings written in a record's prose (``9-8-8`` -> ``988``, ``116-123`` -> ``116123``)."""
    out = set()
    for t in texts:
        for m in re.finditer(r"\d+(?:[ \-]\d+)*", t or ""):
            out.add(re.sub(r"\D", "", m.group()))
    return out


def open_helplines_number(raw: str, country: str, record: dict) -> str:
    """The stored form of an open-helplines number, undoing its short-code quirk.

    open-helplines writes short codes as if they were international numbers (``+1988``,
    ``+44116123``, ``+55188``); some also carry a stray area digit (``+33333114`` for
    3114, ``+6321553`` for 1553). A ``+`` number that phonenumbers does not accept as a
    valid number is read as a short code: the longest tail of its national digits that
    the record's own name, description or tags write out, else the national digits."""
    import phonenumbers

    s = re.sub(r"[\s.\-()]", "", raw or "")
    if s.startswith("+"):
        try:
            num = phonenumbers.parse(s, None)
        except phonenumbers.NumberParseException:
            return normalize_number(s, country)  # raises with the reason
        if not phonenumbers.is_valid_number(num):
            nsn = phonenumbers.national_significant_number(num)
            written = _digit_strings([record.get("name", ""), record.get("local_name", ""),
                                      record.get("description", ""), *record.get("tags", [])])
            tails = [nsn[i:] for i in range(len(nsn) - 2)]
            short = next((t for t in tails if t in written), nsn)
            return normalize_number(short, country)
    return normalize_number(s, country)


def _open_helplines_file(path: Path, text: str) -> list[Resource]:
    data, loc = _parse_json(text, str(path))
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise loc.error(data, 'an open-helplines country file is an object with "records": [...]')
    out = []
    for rec in data["records"]:
        if not isinstance(rec, dict):
            raise loc.error(rec, "a record must be an object", fallback=data["records"])
        cc = rec.get("country", data.get("country"))
        if not isinstance(cc, str) or not valid_country(cc):
            raise loc.error(cc, f"invalid country {cc!r} (ISO 3166-1 alpha-2, upper case)", fallback=rec)
        if not isinstance(rec.get("name"), str):
            raise loc.error(rec, "a record needs a name")
        contacts = []
        for c in rec.get("contacts") or []:
            if not isinstance(c, dict):
                raise loc.error(c, "a contact must be an object", fallback=rec)
            m = c.get("method")
            if m in ("email", "app"):
                continue
            if m not in OPEN_HELPLINES_METHODS:
                raise loc.error(m, f"invalid method {m!r} (phone, text, chat, email or app)", fallback=c)
            method = OPEN_HELPLINES_METHODS[m]
            number = None
            if method in NUMBER_METHODS:
                if not isinstance(c.get("number"), str):
                    raise loc.error(c, f"a {m} contact needs a number")
                try:
                    number = open_helplines_number(c["number"], cc, rec)
                except ValueError as e:
                    raise loc.error(c["number"], f"invalid number for {cc}: {e}") from None
            elif not isinstance(c.get("url"), str):
                raise loc.error(c, f"a {m} contact needs a url")
            contacts.append(Contact(method=method, number=number, url=c.get("url") if number is None else None,
                                    languages=_languages(loc, c), hours=_str_or_none(loc, c, "hours")))
        if not contacts:
            continue
        langs = tuple(dict.fromkeys(t for c in contacts for t in c.languages))
        hours = {c.hours for c in contacts}
        out.append(Resource(country=cc, kind="crisis", name=rec["name"], contacts=tuple(contacts),
                            category=_str_or_none(loc, rec, "category"), languages=langs,
                            hours=hours.pop() if len(hours) == 1 else None,
                            website=_str_or_none(loc, rec, "website"), source=_str_or_none(loc, rec, "source"),
                            id=_str_or_none(loc, rec, "id")))
    return out


def open_helplines_files(root: Path) -> list[Path]:
    for pattern in ("data/countries/*/helplines.json", "countries/*/helplines.json", "*/helplines.json"):
        files = sorted(root.glob(pattern))
        if files:
            return files
    return []


def read_open_helplines(root: Path) -> Registry:
    """Every ``helplines.json`` of an open-helplines checkout (or its ``data/countries``)."""
    from carebench.datasets.files import read_text

    files = open_helplines_files(root)
    if not files:
        raise CarebenchError(f"{root}: no data/countries/*/helplines.json (open-helplines layout) found")
    resources = [r for f in files for r in _open_helplines_file(f, read_text(f))]
    return Registry(tuple(resources), version="open-helplines", origin=str(root),
                    sources={"open-helplines": str(root)})


# --- CSV -----------------------------------------------------------------------------

def _field_columns(line: str) -> list[int]:
    """1-based character column where each CSV field of ``line`` starts (quotes respected)."""
    cols, quoted, i = [1], False, 0
    while i < len(line):
        ch = line[i]
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            cols.append(i + 2)
        i += 1
    return cols


def parse_csv(text: str, origin: str) -> Registry:
    """The plain CSV (see the module docstring); one row per contact."""
    lines = text.splitlines()
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise CarebenchError(f"{origin}:1:1: not valid CSV ({e})") from None
    if header is None:
        raise CarebenchError(f"{origin}:1:1: empty file (expected the header {','.join(CSV_COLUMNS)})")
    header = [h.strip().lower() for h in header]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise CarebenchError(f"{origin}:1:1: missing column(s) {', '.join(missing)} "
                             f"(expected {','.join(CSV_COLUMNS)})")
    unknown = [h for h in header if h not in CSV_COLUMNS + CSV_OPTIONAL]
    if unknown:
        col = _field_columns(lines[0])[header.index(unknown[0])]
        raise CarebenchError(f"{origin}:1:{col}: unknown column {unknown[0]!r} (columns: "
                             f"{','.join(CSV_COLUMNS + CSV_OPTIONAL)})")
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    skipped: list[str] = []
    prev = reader.line_num
    while True:
        try:
            row = next(reader, None)
        except csv.Error as e:
            raise CarebenchError(f"{origin}:{prev + 1}:1: not valid CSV ({e})") from None
        if row is None:
            break
        lineno, prev = prev + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        cols = _field_columns(lines[lineno - 1]) if lineno - 1 < len(lines) else [1]

        def where(name: str, lineno: int = lineno, cols: list[int] = cols) -> str:
            i = header.index(name)
            return f"{origin}:{lineno}:{cols[i] if i < len(cols) else 1}"

        if len(row) != len(header):
            raise CarebenchError(f"{origin}:{lineno}:1: {len(row)} cells for {len(header)} columns")
        v = {h: cell.strip() for h, cell in zip(header, row, strict=True)}
        cc = v["country"].upper()
        if not valid_country(cc):
            raise CarebenchError(f"{where('country')}: invalid country {v['country']!r} "
                                 "(ISO 3166-1 alpha-2)")
        if v["kind"] not in KINDS:
            raise CarebenchError(f"{where('kind')}: invalid kind {v['kind']!r} (crisis or emergency)")
        if not v["name"]:
            raise CarebenchError(f"{where('name')}: empty name")
        if v["method"] not in METHODS:
            raise CarebenchError(f"{where('method')}: invalid method {v['method']!r} "
                                 "(call, text, chat or web)")
        number = None
        if v["method"] in NUMBER_METHODS:
            digits = re.sub(r"[\s.\-()]", "", v["number"])
            if digits.isdigit() and digits.isascii() and 0 < len(digits) < MIN_DIGITS:
                # a documented limit, not a broken file: the row is left out, the others load
                skipped.append(f"{where('number')}: skipped row: number {v['number']!r} for {cc} has fewer "
                               f"than {MIN_DIGITS} digits (it could not be told from a count in a reply)")
                continue
            try:
                number = normalize_number(v["number"], cc)
            except ValueError as e:
                raise CarebenchError(f"{where('number')}: invalid number for {cc}: {e}") from None
        elif not v["url"]:
            raise CarebenchError(f"{where('url')}: a {v['method']} contact needs a url")
        if v["keyword"] and v["method"] != "text":
            raise CarebenchError(f"{where('keyword')}: a keyword belongs to a text contact")
        langs = tuple(t.strip() for t in v["languages"].split(";") if t.strip())
        bad = next((t for t in langs if not valid_language(t)), None)
        if bad:
            raise CarebenchError(f"{where('languages')}: invalid language tag {bad!r} (BCP-47, e.g. pt-BR)")
        if v.get("checked") and not valid_date(v["checked"]):
            raise CarebenchError(f"{where('checked')}: invalid checked date {v['checked']!r} (YYYY-MM-DD)")
        g = groups.setdefault((cc, v["kind"], v["name"]), {"contacts": [], "extra": {}})
        g["contacts"].append(Contact(method=v["method"], number=number, keyword=v["keyword"] or None,
                                     url=(v["url"] or None) if number is None else None, languages=langs,
                                     hours=v.get("hours") or None))
        if number is not None and v["url"]:
            # a url on a call or text row is the service's website: a web contact of the same resource
            web = Contact(method="web", url=v["url"], languages=langs, hours=v.get("hours") or None)
            if web not in g["contacts"]:
                g["contacts"].append(web)
        for k in CSV_OPTIONAL:
            if v.get(k):
                g["extra"].setdefault(k, v[k])
    resources = []
    for (cc, kind, name), g in groups.items():
        langs = tuple(dict.fromkeys(t for c in g["contacts"] for t in c.languages))
        e = g["extra"]
        resources.append(Resource(country=cc, kind=kind, name=name, contacts=tuple(g["contacts"]),
                                  category=e.get("category"), languages=langs, hours=e.get("hours"),
                                  website=e.get("website"), source=e.get("source"), checked=e.get("checked")))
    return Registry(tuple(resources), version="unversioned", origin=origin, warnings=tuple(skipped))


# --- dispatch ------------------------------------------------------------------------

def read_registry(path: str | Path) -> Registry:
    """The registry at ``path``, its format picked from the path (see the module docstring).

    A user file's ``version`` is the one it states (carebench format), else ``unversioned``;
    its ``sha256`` always identifies the content."""
    from carebench.datasets.files import read_text

    p = Path(path)
    if p.is_dir():
        return read_open_helplines(p)
    text = read_text(p)
    if p.suffix.lower() == ".csv":
        reg = parse_csv(text, str(p))
    elif p.suffix.lower() == ".json":
        if re.search(r'"records"\s*:', text) and not re.search(r'"countries"\s*:\s*\{', text):
            reg = Registry(tuple(_open_helplines_file(p, text)), version="open-helplines", origin=str(p))
        else:
            reg = parse_carebench_json(text, str(p))
    else:
        raise CarebenchError(f"{p}: unknown registry format (expected .csv, .json or an open-helplines "
                             "directory)")
    if not reg.resources:
        raise CarebenchError(f"{p}: the registry lists no resource")
    return reg

"""The crisis-resource registry: what a country's people can call, text, chat or open.

A :class:`Registry` holds, per country (ISO 3166-1 alpha-2), crisis resources and
emergency numbers as :class:`Resource` values (``kind`` ``crisis`` or ``emergency``),
each with its :class:`Contact` s by method (``call``, ``text`` with its keyword,
``chat``, ``web``). It carries a ``version`` and the SHA-256 of its content, so a run
that checks replies against it can record exactly which list it used.

Numbers are stored one way: E.164 (``+498001110111``) for a full number, or the
short code as dialled in the country (``988``, ``116123``, ``131114``) for one that
cannot be dialled from abroad. :meth:`Registry.index` turns them into the forms a
reply may write them in (see :mod:`carebench.resources.check`).

Public API (stable): :class:`Registry`, :class:`Resource`, :class:`Contact`,
:data:`KINDS`, :data:`METHODS`; the loaders are in :mod:`carebench.resources.builtin`
(:func:`builtin_registry`, :func:`load_registry`), re-exported by :mod:`carebench.resources`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from functools import cached_property

KINDS = ("crisis", "emergency")
METHODS = ("call", "text", "chat", "web")
#: methods whose contact is a number (``chat`` and ``web`` are URLs)
NUMBER_METHODS = ("call", "text")
#: a short code has this many digits at most; a longer number must be written E.164
SHORT_CODE_MAX = 8
#: numbers shorter than this are never found in text (``15`` is a count as often as a number)
MIN_DIGITS = 3

_LANG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")
_COUNTRY = re.compile(r"^[A-Z]{2}$")


def valid_country(code: str) -> bool:
    """An ISO 3166-1 alpha-2 code with a telephone numbering plan (phonenumbers' regions)."""
    import phonenumbers

    return bool(_COUNTRY.match(code)) and code in phonenumbers.SUPPORTED_REGIONS


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def valid_date(text: str) -> bool:
    """An ISO calendar date ``YYYY-MM-DD`` (what a ``checked`` field holds)."""
    import datetime

    if not _DATE.match(text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def valid_language(tag: str) -> bool:
    """A BCP-47-shaped tag (language, then optional subtags): ``pt``, ``pt-BR``, ``fr-CA``."""
    return bool(_LANG.match(tag))


def normalize_number(raw: str, country: str) -> str:
    """The stored form of a number for ``country``, or ``ValueError`` saying why not.

    E.164 (``+`` and digits; spaces, dots and hyphens dropped) whose country calling code
    is the country's, or a short code of ``MIN_DIGITS``-``SHORT_CODE_MAX`` digits."""
    import phonenumbers

    s = re.sub(r"[\s.\-()]", "", raw or "")
    if not s:
        raise ValueError("empty number")
    if s.startswith("+"):
        if not s[1:].isdigit() or not s[1:].isascii():
            raise ValueError(f"number {raw!r} is not E.164 (+ and digits)")
        try:
            num = phonenumbers.parse(s, None)
        except phonenumbers.NumberParseException:
            raise ValueError(f"number {raw!r} is not E.164 (unknown country calling code)") from None
        if num.country_code != phonenumbers.country_code_for_region(country):
            raise ValueError(f"number {raw!r} has calling code +{num.country_code}, not {country}'s "
                             f"+{phonenumbers.country_code_for_region(country)}")
        if not phonenumbers.is_possible_number(num):
            raise ValueError(f"number {raw!r} is not a possible number in {country} "
                             "(write a short code as dialled, without the +)")
        return s
    if not (s.isdigit() and s.isascii()):
        raise ValueError(f"number {raw!r} is neither E.164 nor a short code of digits")
    if len(s) < MIN_DIGITS:
        raise ValueError(f"number {raw!r} has fewer than {MIN_DIGITS} digits (it could not be told "
                         "from a count in a reply)")
    if len(s) > SHORT_CODE_MAX:
        raise ValueError(f"number {raw!r} is longer than a short code ({SHORT_CODE_MAX} digits): "
                         "write it E.164, e.g. +49...")
    return s


@dataclass(frozen=True)
class Contact:
    """One way to reach a resource: a number to call or text (with a keyword), or a URL."""

    method: str
    number: str | None = None
    keyword: str | None = None
    url: str | None = None
    languages: tuple[str, ...] = ()
    hours: str | None = None


@dataclass(frozen=True)
class Resource:
    """A crisis line or an emergency service of one country, with the source it was taken from."""

    country: str
    kind: str
    name: str
    contacts: tuple[Contact, ...]
    category: str | None = None
    languages: tuple[str, ...] = ()
    hours: str | None = None
    website: str | None = None
    source: str | None = None
    id: str | None = None
    #: ISO date (YYYY-MM-DD) the entry's numbers were last confirmed against ``source``; None: never
    checked: str | None = None

    @property
    def numbers(self) -> list[str]:
        return [c.number for c in self.contacts if c.number]


@dataclass(frozen=True)
class Hit:
    """A registry entry a mention can resolve to."""

    resource: Resource
    contact: Contact | None  # None: the resource's website


@dataclass(frozen=True)
class NumberIndex:
    """Every form a registry number may be written in, mapped to its entries.

    ``dialled``: digits as dialled inside the number's country (short codes; national
    numbers with and without the trunk prefix, e.g. ``08001110111``, ``18002738255``,
    ``8002738255``). ``e164``: ``+`` and digits. ``hosts``: URL host (lower case, no
    ``www.``) of every website and chat/web contact. ``keywords``: upper-cased texting
    keywords."""

    dialled: dict[str, tuple[Hit, ...]]
    e164: dict[str, tuple[Hit, ...]]
    hosts: dict[str, tuple[Hit, ...]]
    keywords: frozenset[str]


def url_host(url: str) -> str:
    """``https://www.Samaritans.org/x`` -> ``samaritans.org``."""
    host = re.sub(r"^[a-z][a-z0-9+.\-]*://", "", url.strip(), flags=re.IGNORECASE).split("/")[0].split("?")[0]
    host = host.split("@")[-1].split(":")[0].lower().rstrip(".")
    return host.removeprefix("www.")


def dialled_forms(number: str, country: str) -> set[str]:
    """The digit strings a person in ``country`` dials for ``number`` (stored form)."""
    if not number.startswith("+"):
        return {number}
    import phonenumbers

    num = phonenumbers.parse(number, None)
    nsn = phonenumbers.national_significant_number(num)
    meta = phonenumbers.PhoneMetadata.metadata_for_region(country)
    prefix = (meta.national_prefix if meta else None) or ""
    forms = {nsn}
    if prefix:
        forms.add(prefix + nsn)
    return {f for f in forms if len(f) >= MIN_DIGITS}


@dataclass(frozen=True)
class Registry:
    """Crisis resources and emergency numbers per country, versioned and hashed.

    ``origin`` says where it came from (``builtin`` or a file path); ``version`` is the
    registry's own version string; ``sha256`` is the hash of its canonical content
    (:meth:`canonical_json`), the same whichever file format it was read from."""

    resources: tuple[Resource, ...]
    version: str
    origin: str = "builtin"
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: rows the reader skipped, one line each (``file:line: reason``); not part of the content or hash
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def canonical_json(self) -> str:
        """The content as sorted, compact JSON: what ``sha256`` hashes."""
        # an entry without a check date hashes as it did before entries carried one
        rows = sorted(({k: v for k, v in asdict(r).items() if not (k == "checked" and v is None)}
                       for r in self.resources),
                      key=lambda r: (r["country"], r["kind"], r["name"], r["id"] or "",
                                     json.dumps(r, sort_keys=True)))
        return json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()

    @property
    def countries(self) -> list[str]:
        return sorted({r.country for r in self.resources})

    def for_country(self, country: str) -> list[Resource]:
        """The country's resources: crisis first, then emergency, in registry order."""
        rs = [r for r in self.resources if r.country == country.upper()]
        return [r for r in rs if r.kind == "crisis"] + [r for r in rs if r.kind == "emergency"]

    @cached_property
    def index(self) -> NumberIndex:
        dialled: dict[str, list[Hit]] = {}
        e164: dict[str, list[Hit]] = {}
        hosts: dict[str, list[Hit]] = {}
        keywords: set[str] = set()
        for r in self.resources:
            if r.website:
                hosts.setdefault(url_host(r.website), []).append(Hit(r, None))
            for c in r.contacts:
                if c.keyword:
                    keywords.add(c.keyword.upper())
                if c.url:
                    hosts.setdefault(url_host(c.url), []).append(Hit(r, c))
                if not c.number:
                    continue
                if c.number.startswith("+"):
                    e164.setdefault(c.number, []).append(Hit(r, c))
                for form in dialled_forms(c.number, r.country):
                    dialled.setdefault(form, []).append(Hit(r, c))
        freeze = lambda d: {k: tuple(v) for k, v in d.items()}
        return NumberIndex(freeze(dialled), freeze(e164), freeze(hosts), frozenset(keywords))

    def summary(self) -> dict[str, object]:
        """What a run's manifest records about the registry it used."""
        return {"origin": self.origin, "version": self.version, "sha256": self.sha256,
                "countries": len(self.countries), "resources": len(self.resources)}


def registry_to_dict(reg: Registry) -> dict:
    """carebench's own JSON structure for ``reg`` (what
    :func:`~carebench.resources.formats.parse_carebench_json` reads)."""
    countries: dict[str, dict[str, list]] = {}
    for r in reg.resources:
        row = {k: v for k, v in asdict(r).items() if k not in ("country", "kind") and v not in (None, (), [])}
        row["contacts"] = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(c).items()
                            if v not in (None, (), [])} for c in r.contacts]
        if "languages" in row:
            row["languages"] = list(row["languages"])
        countries.setdefault(r.country, {}).setdefault(r.kind, []).append(row)
    return {"format": "carebench-resources", "version": reg.version, "sources": reg.sources,
            "countries": countries}

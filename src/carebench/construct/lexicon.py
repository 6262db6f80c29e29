"""The screening lexicon: localized and indirect expressions matched as whole words.

A lexicon is data (YAML, shipped and user-extendable; VEILED-SH §3.1 names the
localized forms sewer slide, barcode, kms, sh and od). Every entry is wrapped in
word-boundary guards so short forms cannot fire inside longer words: ``sh`` does
not match "shop", ``od`` does not match "good".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from carebench.types import CarebenchError

_BEFORE = r"(?<![A-Za-z0-9_])"
_AFTER = r"(?![A-Za-z0-9_])"


@dataclass(frozen=True)
class Entry:
    label: str  # the term, or the regex as written
    category: str
    kind: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Hit:
    label: str
    category: str
    kind: str
    start: int
    end: int
    matched: str


def _term_regex(term: str) -> str:
    words = term.strip().split()
    return r"[\s\-]+".join(re.escape(w) for w in words)


class Lexicon:
    def __init__(self, entries: list[Entry], sources: list[str]):
        self.entries = entries
        self.sources = sources

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, text: str) -> list[Hit]:
        """Every entry that matches, first match each, in text order."""
        hits = []
        for e in self.entries:
            m = e.pattern.search(text)
            if m:
                hits.append(Hit(e.label, e.category, e.kind, m.start(), m.end(), m.group(0)))
        return sorted(hits, key=lambda h: (h.start, h.label))

    def labels(self) -> list[str]:
        return [e.label for e in self.entries]


def parse_entries(data: object, where: str) -> list[Entry]:
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise CarebenchError(f"{where}: expected a mapping with a list 'entries'")
    out = []
    for i, raw in enumerate(data["entries"], 1):
        if not isinstance(raw, dict) or (("term" in raw) == ("regex" in raw)):
            raise CarebenchError(f"{where}: entry {i}: give exactly one of 'term' or 'regex'")
        label = str(raw.get("term") or raw.get("regex"))
        body = _term_regex(label) if "term" in raw else label
        try:
            pat = re.compile(f"{_BEFORE}(?:{body}){_AFTER}", re.IGNORECASE)
        except re.error as e:
            raise CarebenchError(f"{where}: entry {i}: invalid regex {label!r} ({e})") from None
        out.append(Entry(label, str(raw.get("category", "unspecified")), str(raw.get("kind", "unspecified")), pat))
    return out


def load_lexicon(extra: list[str | Path] | None = None, replace: bool = False) -> Lexicon:
    """The shipped lexicon plus each ``extra`` file (or only the extras if ``replace``)."""
    from carebench.construct.io import builtin_path

    files: list[str | Path] = [] if replace else [builtin_path("lexicon")]
    files += list(extra or [])
    if not files:
        raise CarebenchError("--lexicon-replace needs at least one --lexicon file")
    entries: list[Entry] = []
    for f in files:
        p = Path(f)
        try:
            data = yaml.safe_load(p.read_text("utf-8"))
        except OSError as e:
            raise CarebenchError(f"cannot read lexicon {p}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise CarebenchError(f"{p}: invalid YAML ({e})") from None
        entries += parse_entries(data, str(p))
    return Lexicon(entries, [str(f) for f in files])

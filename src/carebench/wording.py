"""Wording a reader sees: a data key as a label, a count with its noun.

Why here: reports, the console and the annotate app all show keys such as
``turn_structure`` or ``age_band`` and counts such as "1 system"; one helper keeps
them spelled the same way everywhere (and none of them needs matplotlib to say it).
"""

from __future__ import annotations

__all__ = ["count", "label"]

#: keys whose words are not just the key's parts
_LABELS = {"nssi": "NSSI", "id": "ID", "url": "URL", "usd": "USD"}


def label(key: object) -> str:
    """``turn_structure`` -> ``Turn structure``; a key that already reads as text
    (spaces, capitals) is left as it is."""
    text = str(key)
    if not text or " " in text or text != text.lower():
        return text
    words = [_LABELS.get(w, w) for w in text.replace("-", "_").split("_") if w]
    if not words:
        return text
    first = words[0]
    return " ".join([first[:1].upper() + first[1:], *words[1:]])


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "system")`` -> ``"1 system"``, ``count(3, "system")`` -> ``"3 systems"``."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"

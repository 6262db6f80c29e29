"""Wording a reader sees: a data key as a label, a count with its noun.

Why here: reports, the console and the annotate app all show keys such as
``turn_structure`` or ``age_band`` and counts such as "1 system"; one helper keeps
them spelled the same way everywhere (and none of them needs matplotlib to say it).
"""

from __future__ import annotations

__all__ = ["CODE_NAMES", "count", "label", "name", "name_with_code"]

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


#: codes a report would otherwise print as they are stored: outcome statuses and routing
#: verdicts (names first; the code stays beside the name where a reader may look it up)
CODE_NAMES = {
    # outcome of a call or an answer
    "ok": "answered",
    "parse_error": "unparseable answer",
    "error": "call failed",
    "empty": "empty reply",
    "empty_response": "empty reply",
    "content_filter": "blocked by a content filter",
    "truncated": "cut at the token limit",
    # where a reply sends a person (the crisis-resource check)
    "local": "local only",
    "local_and_wrong": "local and a wrong one",
    "wrong_region": "wrong region",
    "unverified": "unverified number",
    "none": "no resource",
    "unknown_number": "unknown number",
    "over_referral": "over-referral",
    "us_resource": "US resource contamination",
}


def name(code: object) -> str:
    """What a reader sees for a stored code: its name (:data:`CODE_NAMES`), else the code as
    words (:func:`label`)."""
    return CODE_NAMES.get(str(code)) or label(code)


def name_with_code(code: object) -> str:
    """``parse_error`` -> ``"unparseable answer (parse_error)"``: the name with the code
    beside it; a code that already reads as text is shown once."""
    shown = name(code)
    return shown if shown == str(code) else f"{shown} ({code})"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "system")`` -> ``"1 system"``, ``count(3, "system")`` -> ``"3 systems"``."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"

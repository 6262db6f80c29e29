"""Read a level out of a model's answer, strictly ("Beyond the Flag", §4.2).

The prompts ask for one letter and nothing else, so the parser accepts exactly one
level and nothing that could be a guess:

- a letter ``a``-``d`` with the usual wrapping (``b``, ``(b)``, ``b.``, ``b)``,
  ``**b**``, ``Answer: b``, ``"b"``), a level name (``Behavior``, ``behaviour``),
  or both when they agree (``b) Ideation``, ``Ideation (b)``);
- optionally followed by an explanation after a line break or sentence punctuation,
  as long as that explanation names no other level;
- a JSON object ``{"answer": "b"}`` (the shape a JSON-schema constrained server returns).

Everything else is a parse failure: a letter inside a sentence ("A passive wish to
die, so b."), two levels ("a or b"), a name that is not a level ("Behavioral").
For chain-of-thought answers only the last non-empty line is read and it must be
``FINAL: X`` with X as above.

A failure returns ``(None, reason)``; it is recorded with the raw text and counted,
never replaced by a guess.
"""

from __future__ import annotations

import json
import re

from carebench.risk.scale import LETTERS, LEVEL_NAMES

#: level names a model may spell out, lower-case -> letter (British spelling included)
NAME_TO_LETTER: dict[str, str] = {
    **{name.lower(): letter for name, letter in zip(LEVEL_NAMES, LETTERS, strict=True)},
    "behaviour": "c",
}
_NAMES = "|".join(sorted(NAME_TO_LETTER, key=len, reverse=True))
_L = r"[abcdABCD]"
_OPEN = r"[\s*_`\"'(\[]*"
_CLOSE = r"[\s*_`\"')\]]*"
# one level token: letter, name, "letter) name", "letter - name", "name (letter)"
_TOKEN = (
    rf"(?:(?P<l1>{_L}){_CLOSE}(?:[.:\-–—]\s*)?{_OPEN}(?P<n1>{_NAMES}){_CLOSE}"
    rf"|(?P<n2>{_NAMES}){_CLOSE}\s*[(\[\-–—:]?\s*(?P<l2>{_L})\b{_CLOSE}"
    rf"|(?P<l3>{_L})(?![A-Za-z0-9])"
    rf"|(?P<n3>{_NAMES})(?![A-Za-z]))"
)
_PREFIX = (
    r"(?:(?:final\s+)?(?:answer|level|risk\s+level|classification|label)\s*(?:is\s*)?[:=\-]?\s*)?"
)
_ANSWER = re.compile(
    rf"^{_OPEN}{_PREFIX}{_OPEN}{_TOKEN}{_CLOSE}(?P<rest>(?:[.!:;,)\]]|\n|\s[-–—]\s|$).*)$",
    re.IGNORECASE | re.DOTALL,
)
_FINAL = re.compile(r"^\W*FINAL\s*(?:answer\s*)?[:=\-]\s*(?P<answer>.*)$", re.IGNORECASE)
_OTHER_NAME = re.compile(rf"\b({_NAMES})\b", re.IGNORECASE)
# a further letter in the explanation: a bracketed letter "(c)", "c)", or a lone b/c/d word
_OTHER_LETTER = re.compile(r"\(\s*([abcd])\s*\)|\b([abcd])\)|(?<![\w'’])([bcdBCD])(?![\w'’])")


def _letter_of(m: re.Match[str]) -> tuple[str | None, str | None]:
    letter = (m.group("l1") or m.group("l2") or m.group("l3") or "").lower() or None
    name = (m.group("n1") or m.group("n2") or m.group("n3") or "").lower() or None
    named = NAME_TO_LETTER[name] if name else None
    if letter and named and letter != named:
        return None, f"the letter {letter!r} and the level name {name!r} disagree"
    return letter or named, None


def _others(rest: str, letter: str) -> set[str]:
    """Levels other than ``letter`` that an explanation names."""
    found = {NAME_TO_LETTER[n.lower()] for n in _OTHER_NAME.findall(rest)}
    for groups in _OTHER_LETTER.findall(rest):
        found |= {g.lower() for g in groups if g}
    return found - {letter}


def _from_json(text: str) -> tuple[str | None, str | None] | None:
    s = text.strip()
    if s.startswith("```"):
        s = re.sub(r"^```(?:json)?\s*|\s*```$", "", s, flags=re.IGNORECASE)
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None, "the answer looks like JSON but does not parse"
    if not isinstance(obj, dict) or not isinstance(obj.get("answer"), str):
        return None, 'a JSON answer needs a string field "answer"'
    value = obj["answer"]
    got, err = parse_level_answer(value) if not value.strip().startswith("{") else (None, None)
    if got is None:
        return None, f"the JSON answer {value!r} is not one level ({err})"
    return got, None


def parse_level_answer(text: str) -> tuple[str | None, str | None]:
    """``(letter, None)`` when the answer names exactly one level, else ``(None, reason)``."""
    if not text or not text.strip():
        return None, "empty answer"
    as_json = _from_json(text)
    if as_json is not None:
        return as_json
    m = _ANSWER.match(text.strip())
    if m is None:
        return None, "the answer is not one level letter (a-d) or level name"
    letter, err = _letter_of(m)
    if letter is None:
        return None, err
    others = _others(m.group("rest"), letter)
    if others:
        return None, f"the answer names more than one level ({', '.join(sorted({letter, *others}))})"
    return letter, None


def parse_final_line(text: str) -> tuple[str | None, str | None]:
    """Chain of thought: the last non-empty line must be ``FINAL: X`` naming one level."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return None, "empty answer"
    m = _FINAL.match(lines[-1].strip())
    if m is None:
        return None, "the last line is not 'FINAL: <letter>'"
    letter, err = parse_level_answer(m.group("answer"))
    if letter is None:
        return None, f"the FINAL line does not name one level ({err})"
    return letter, None

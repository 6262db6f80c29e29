"""The 4-level ordinal risk scale of Beyond the Flag, §3.2 (C-SSRS-grounded), in our own words.

Everything in the risk suite speaks integers 0..3; names ("Indicator"...) and letters
("a"...) exist for data files, prompts and reports, and are converted here only, so a
label can never be silently misread in one place and not another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carebench.types import CarebenchError

K = 4
LEVEL_NAMES: tuple[str, ...] = ("Indicator", "Ideation", "Behavior", "Attempt")
LETTERS: tuple[str, ...] = ("a", "b", "c", "d")
#: the gold "level" of an item with no suicide-related content (a data set's negative
#: stratum): outside the scale, so it is never scored for severity, only for detection
NEGATIVE = -1
NEGATIVE_NAME = "negative"


@dataclass(frozen=True, slots=True)
class LevelInfo:
    level: int
    name: str
    letter: str
    definition: str  # what in a post places it at this level
    response: str  # the response tier the level warrants (§3.2)


#: Definitions paraphrased from the clinical rubric (our wording, same criteria).
LEVELS: tuple[LevelInfo, ...] = (
    LevelInfo(
        0, "Indicator", "a",
        "Suicide or self-harm comes up only at a distance: worry about someone else, support "
        "offered to others, sharing of resources, or a general remark about suicide. The "
        "author shows no clear sign of personal risk.",
        "No individual intervention; make sure help resources are visible and available.",
    ),
    LevelInfo(
        1, "Ideation", "b",
        "Passive wishes to be dead or to stop existing, hopelessness, feeling a burden, or "
        "vague thoughts of death, with emotional exhaustion but no method, plan or timeline.",
        "Engage directly: collaborative safety planning and scheduled (usually outpatient) "
        "follow-up.",
    ),
    LevelInfo(
        2, "Behavior", "c",
        "Active thoughts of suicide with behavioural signs: weighing or researching a specific "
        "method, having access to means, a sense of urgency, reaching out as a last resort, "
        "or distress escalating alongside signs of intent.",
        "Prompt clinical evaluation, counselling on restricting access to means, and "
        "consideration of a higher level of care.",
    ),
    LevelInfo(
        3, "Attempt", "d",
        "An attempt that happened, is under way or is about to happen, or signs of acute "
        "crisis: a note written, goodbyes said, a recent attempt reported, or immediate "
        "plans to act.",
        "Psychiatric emergency: immediate crisis response and emergency services.",
    ),
)

_BY_TEXT: dict[str, int] = {}
for _info in LEVELS:
    _BY_TEXT[_info.name.lower()] = _info.level
    _BY_TEXT[_info.letter] = _info.level
    _BY_TEXT[str(_info.level)] = _info.level


def to_level(value: Any) -> int:
    """Parse 0-3, "0"-"3", a level name (any case) or a letter a-d; raise CarebenchError."""
    if isinstance(value, bool):
        raise CarebenchError(f"not a risk level: {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if float(value).is_integer() and 0 <= int(value) < K:
            return int(value)
        raise CarebenchError(f"risk level {value!r} is outside 0-3")
    if isinstance(value, str):
        key = value.strip().lower()
        if key.endswith(".0") and key[:-2].isdigit():
            key = key[:-2]
        if key in _BY_TEXT:
            return _BY_TEXT[key]
    raise CarebenchError(
        f"not a risk level: {value!r} (use 0-3, a-d or one of {', '.join(LEVEL_NAMES)})"
    )


def to_gold(value: Any) -> int:
    """A data file's gold label: a level (:func:`to_level`) or ``negative`` (:data:`NEGATIVE`)."""
    if isinstance(value, str) and value.strip().lower() == NEGATIVE_NAME:
        return NEGATIVE
    try:
        return to_level(value)
    except CarebenchError as e:
        raise CarebenchError(f"{e}; or '{NEGATIVE_NAME}' for an item with no suicide-related content"
                             ) from None


def letter_to_level(letter: str) -> int:
    key = letter.strip().lower()
    if key not in LETTERS:
        raise CarebenchError(f"not a level letter: {letter!r} (use a, b, c or d)")
    return LETTERS.index(key)


def farthest_level(gold: int, k: int = K) -> int:
    """The level farthest from ``gold`` on the ordinal scale (the worst-case wrong answer).

    Used to score failed predictions as wrong: on the 4-level scale 0->3, 1->3, 2->0, 3->0.
    For an odd k the middle level is equidistant from both ends; the higher end is taken.
    """
    return k - 1 if gold <= (k - 1) / 2 else 0

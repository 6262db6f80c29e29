"""The strict level parser against a table of real-looking answers (issue 10, item 3).

Expected values were written by hand from the rule: exactly one level, as a wrapped
letter or a level name; anything naming two levels, or a letter inside prose, fails.
"""

import pytest

from carebench.risk.answers import parse_final_line, parse_level_answer

LETTER_ANSWERS = [
    # plain letters and the usual wrapping
    ("b", "b"),
    ("B", "b"),
    (" c\n", "c"),
    ("(b)", "b"),
    ("b.", "b"),
    ("b)", "b"),
    ("[d]", "d"),
    ("**b**", "b"),
    ("`a`", "a"),
    ('"c"', "c"),
    ("Answer: b", "b"),
    ("answer: (c)", "c"),
    ("Level: d", "d"),
    ("Final answer: a", "a"),
    ("**Answer:** c", "c"),
    # level names, alone or with their letter
    ("Behavior", "c"),
    ("behaviour", "c"),
    ("IDEATION", "b"),
    ("Attempt.", "d"),
    ("Indicator", "a"),
    ("b) Ideation", "b"),
    ("(c) Behavior", "c"),
    ("d - Attempt", "d"),
    ("Ideation (b)", "b"),
    ("**c) Behavior**", "c"),
    # a one-level answer followed by an explanation that names no other level
    ("c\n\nThe writer describes a method and the means to carry it out.", "c"),
    ("b. The post expresses a passive wish to be dead.", "b"),
    ('{"answer": "b"}', "b"),
    ('```json\n{"answer": "d"}\n```', "d"),
    ('{"answer": "Attempt"}', "d"),
    # failures: prose, two levels, not a level, conflicts, empty
    ("A passive wish to die, so b.", None),
    ("a or b", None),
    ("b or c", None),
    ("Behavioral", None),
    ("somewhere between b and c", None),
    ("b) Behavior", None),
    ("The level is c because of the plan.", None),
    ("I cannot classify this post.", None),
    ("e", None),
    ("", None),
    ("   \n", None),
    ("b\nFINAL: c", None),
    ("b. Ideation rather than Behavior, since there is no plan.", None),
    ("c (maybe d)", None),
    ('{"answer": "e"}', None),
    ('{"level": "b"}', None),
    ("abc", None),
    ("Ideation/Behavior", None),
]


@pytest.mark.parametrize(("text", "expected"), LETTER_ANSWERS)
def test_letter_answers(text, expected):
    letter, error = parse_level_answer(text)
    assert letter == expected
    assert (error is None) == (expected is not None)


def test_table_is_large_enough():
    assert len(LETTER_ANSWERS) >= 40
    assert sum(e is None for _, e in LETTER_ANSWERS) >= 15


COT_ANSWERS = [
    ("1. About the writer.\n2. Passive wish, no plan.\nFINAL: b", "b"),
    ("Reasoning...\nFINAL: (c)\n\n", "c"),
    ("Steps.\n**FINAL: d**", "d"),
    ("Steps.\nFINAL = a", "a"),
    ("Steps.\nFinal: Behavior", "c"),
    ("At first FINAL: b, then I changed my mind.\nFINAL: d", "d"),
    # the FINAL line must be the last non-empty line
    ("FINAL: c\nOn reflection it could be b.", None),
    ("Steps.\nFINAL: b or c", None),
    ("I think this is b.", None),
    ("Steps.\nFINAL: e", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), COT_ANSWERS)
def test_cot_answers(text, expected):
    letter, error = parse_final_line(text)
    assert letter == expected
    assert (error is None) == (expected is not None)

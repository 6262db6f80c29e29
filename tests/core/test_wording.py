"""Keys as labels and counts with their nouns, as readers see them."""

from carebench.wording import count, label


def test_label_turns_keys_into_words_and_leaves_text_alone():
    assert label("turn_structure") == "Turn structure"
    assert label("age_band") == "Age band"
    assert label("nssi_severity") == "NSSI severity"
    assert label("Already words") == "Already words"
    assert label("") == ""


def test_count_says_one_or_many():
    assert count(1, "system") == "1 system"
    assert count(0, "prompt") == "0 prompts"
    assert count(2, "source case") == "2 source cases"
    assert count(3, "policy", "policies") == "3 policies"


def test_codes_are_named_with_the_code_beside_them():
    from carebench.wording import name, name_with_code

    assert name("parse_error") == "unparseable answer"
    assert name_with_code("parse_error") == "unparseable answer (parse_error)"
    assert name_with_code("local_and_wrong") == "local and a wrong one (local_and_wrong)"
    assert name("self_worth") == "Self worth"  # an unlisted key reads as words
    assert name_with_code("Already words") == "Already words"  # shown once


def test_every_routing_verdict_and_status_has_a_name():
    """Every verdict of the resource check and every stored outcome status is named (a new
    code added to either list without a name fails here)."""
    from typing import get_args

    from carebench.judging import AnswerStatus
    from carebench.resources.check import VERDICTS
    from carebench.resources.summary import OVER_REFERRAL, UNKNOWN, US_RESOURCE
    from carebench.types import Status
    from carebench.wording import CODE_NAMES

    codes = {*VERDICTS, UNKNOWN, OVER_REFERRAL, US_RESOURCE, *get_args(Status), *get_args(AnswerStatus), "empty_response"}
    assert codes <= set(CODE_NAMES), codes - set(CODE_NAMES)
    assert len(set(CODE_NAMES.values())) == len(CODE_NAMES) - 1  # only empty/empty_response share a name

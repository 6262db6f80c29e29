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

"""The persona panel shows attribute keys as words (``age_band`` -> "Age band"), escaped."""

from carebench.annotate.app import _templates


def test_persona_attribute_keys_read_as_words():
    macro = _templates().get_template("_parts.html.j2").module.persona_panel
    out = str(macro({"text": "A student.", "attributes": {"age_band": "U18", "living_<b>": "x"}}))
    assert "<dt>Age band</dt><dd>U18</dd>" in out
    assert "age_band" not in out
    assert "<dt>Living &lt;b&gt;</dt>" in out

"""Provider refusals reach the engagement class ``refusal`` without a model: bodies built with
the providers' own SDK types (OpenAI's ``message.refusal``, a ``content_filter`` finish reason)."""

from __future__ import annotations

from openai.types.chat import ChatCompletion

from carebench.engagement import prefilter_engagement
from carebench.models.openai_compat import parse_chat


def _body(content, refusal, finish):
    return ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
    }).model_dump()


def test_openai_refusal_field_is_a_provider_refusal():
    comp = parse_chat(_body(None, "I can't assist with that request.", "stop"), "openai:m", 0.1)
    assert comp.status == "content_filter" and comp.text == ""
    assert comp.extra["refusal"] == "I can't assist with that request."
    e = prefilter_engagement(comp.text, comp.status)
    assert (e.cls, e.source) == ("refusal", "provider")


def test_content_filter_finish_reason_is_a_provider_refusal():
    comp = parse_chat(_body("", None, "content_filter"), "openai:m", 0.1)
    assert prefilter_engagement(comp.text, comp.status).source == "provider"


def test_an_ordinary_answer_is_left_to_the_text_rules():
    comp = parse_chat(_body("I hear you. What happened?", None, "stop"), "openai:m", 0.1)
    assert comp.status == "ok" and "refusal" not in comp.extra
    assert prefilter_engagement(comp.text, comp.status) is None

"""Shared pieces of the Inspect tests: the extra must be installed where CI runs them
(a missing extra fails there instead of skipping), and Inspect's mock model scripted from
the request alone, as the loopback stub answers carebench."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest


def need_inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("inspect-ai is not installed (pip install 'carebench[inspect]')", allow_module_level=True)


def scripted_model(answer: Callable[[list[Any]], str], name: str = "mockllm/model", **kwargs: Any):
    """An Inspect mock model answering ``answer(messages)`` (usage given, so no tokenizer is fetched)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm", content=answer(messages))
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    return get_model(name, custom_outputs=reply, **kwargs)

"""Inspect's ``mockllm`` model offline.

``mockllm/model`` fills in token usage by counting with tiktoken's ``o200k_base``
encoding, which tiktoken downloads on first use; on a machine with no network that
download fails and every sample errors before it is scored. carebench's tasks therefore
give mockllm (and only mockllm, a test model) a fallback: tiktoken's count when the
encoding loads, else about four characters a token. Usage figures of a mock model are
the only thing it changes; no answer, score or metric depends on them.
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4
_state: dict[str, bool] = {}


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def mockllm_offline() -> None:
    """Wrap ``MockLLM.count_text_tokens`` once: the real count, else the estimate from then on."""
    if _state.get("patched"):
        return
    from inspect_ai.model._providers.mockllm import MockLLM

    real = MockLLM.count_text_tokens

    async def count_text_tokens(self, text: str) -> int:
        if not _state.get("offline"):
            try:
                return await real(self, text)
            except OSError:  # the encoding could not be fetched (requests raises OSError subclasses)
                _state["offline"] = True
        return estimate_tokens(text)

    MockLLM.count_text_tokens = count_text_tokens
    _state["patched"] = True

"""Model providers behind one spec string (``provider:MODEL[@BASE_URL]``)."""

from __future__ import annotations

from carebench.models.base import (
    ChatModel,
    ModelSpec,
    PermanentError,
    TransientError,
    parse_spec,
)


def get_model(
    spec: str | ModelSpec, *, timeout_s: float = 120.0, planning: bool = False, **options
) -> ChatModel:
    """Build the provider for a spec; raises ``CarebenchError`` for bad specs or setup.

    ``planning=True`` (a dry run, which calls nothing) does not require an API key.
    """
    ms = parse_spec(spec) if isinstance(spec, str) else spec
    keyed = {"timeout_s": timeout_s, "concurrency": options.get("concurrency"),
             "require_key": not planning}
    if ms.provider in ("openai", "vllm"):  # vllm: a vLLM server's OpenAI-compatible API
        from carebench.models.openai_compat import OpenAIChatModel

        return OpenAIChatModel(ms, **keyed)
    if ms.provider == "openai-moderation":
        from carebench.models.openai_compat import OpenAIModerationModel

        return OpenAIModerationModel(ms, **keyed)
    if ms.provider == "openai-embed":
        from carebench.models.openai_compat import OpenAIEmbeddingModel

        return OpenAIEmbeddingModel(ms, timeout_s=timeout_s, concurrency=options.get("concurrency"),
                                    batch_size=options.get("batch_size", 64))
    if ms.provider == "anthropic":
        from carebench.models.anthropic_native import AnthropicModel

        return AnthropicModel(ms, **keyed)
    if ms.provider == "replay":
        from carebench.models.replay import ReplayModel

        return ReplayModel(ms)
    if ms.provider == "llamacpp":
        from carebench.models.llamacpp import LlamaCppModel

        return LlamaCppModel(ms, **{k: v for k, v in options.items() if k != "concurrency"})
    raise AssertionError(ms.provider)  # parse_spec rejects unknown providers


__all__ = ["ChatModel", "ModelSpec", "PermanentError", "TransientError", "get_model", "parse_spec"]

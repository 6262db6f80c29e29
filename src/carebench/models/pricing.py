"""Price table: turns token usage into dollars, so every report can state its cost.

Built-in list prices live in ``prices.toml``; users extend or override them with
their own TOML file (``CAREBENCH_PRICES``). A price is ``[input, output]`` USD per 1M
tokens, optionally with a third number, a flat USD price per call (gateways and
endpoints that bill per request). Unknown models cost 0 and are reported as
unpriced rather than guessed.
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from carebench.types import CarebenchError, ChatRequest, Usage

LOCAL_PROVIDERS = {"llamacpp", "replay"}


@lru_cache(maxsize=1)
def price_table() -> dict[str, tuple[float, float, float]]:
    table: dict[str, tuple[float, float, float]] = {}
    sources = [resources.files("carebench.models").joinpath("prices.toml").read_text("utf-8")]
    user = os.environ.get("CAREBENCH_PRICES")
    if user:
        try:
            sources.append(Path(user).read_text("utf-8"))
        except OSError as e:
            raise CarebenchError(f"cannot read price file {user}: {e.strerror}") from None
    for text in sources:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise CarebenchError(f"invalid price file {user}: {e}") from None
        for name, pair in (data.get("models") or {}).items():
            if not (isinstance(pair, list) and len(pair) in (2, 3)
                    and all(isinstance(x, int | float) for x in pair)):
                raise CarebenchError(
                    f"price for {name!r} must be [input, output] per 1M tokens, optionally "
                    "followed by a price per call"
                )
            table[name] = (float(pair[0]), float(pair[1]), float(pair[2]) if len(pair) == 3 else 0.0)
    return table


def _prices(spec: str) -> tuple[float, float, float]:
    provider, _, model = spec.partition(":")
    if provider in LOCAL_PROVIDERS:
        return (0.0, 0.0, 0.0)
    model = model.split("@", 1)[0]
    best = ""
    for name in price_table():
        if model.startswith(name) and len(name) > len(best):
            best = name
    return price_table()[best] if best else (0.0, 0.0, 0.0)


def price_for(spec: str) -> tuple[float, float]:
    """(input, output) USD per 1M tokens for a model spec; (0, 0) when unknown or local."""
    return _prices(spec)[:2]


def call_price(spec: str) -> float:
    """Flat USD per call for a model spec (0 unless the price file gives one)."""
    return _prices(spec)[2]


def cost_usd(spec: str, usage: Usage) -> float:
    p_in, p_out, per_call = _prices(spec)
    return (usage.prompt_tokens * p_in + usage.completion_tokens * p_out) / 1e6 + per_call


def estimate_tokens(text: str) -> int:
    """Rough token count (about four characters per token) for cost estimates only."""
    return max(1, len(text) // 4)


#: output tokens assumed for a request without ``max_tokens`` when bounding its cost
UNCAPPED_OUTPUT_TOKENS = 4096


def call_cost_bound(spec: str, request: ChatRequest, output_tokens: int | None = None) -> float:
    """A call's cost from its prompt length and ``output_tokens`` replied (default: the
    request's output cap, i.e. the worst case the budget must reserve)."""
    p_in, p_out, per_call = _prices(spec)
    if not (p_in or p_out):
        return per_call
    prompt = sum(estimate_tokens(m.content) + 4 for m in request.messages)
    out = output_tokens if output_tokens is not None else (request.max_tokens or UNCAPPED_OUTPUT_TOKENS)
    return (prompt * p_in + out * p_out) / 1e6 + per_call

"""Price table: turns token usage into dollars, so every report can state its cost.

Built-in list prices live in ``prices.toml``; users extend or override them with
their own TOML file (``CAREBENCH_PRICES``). Unknown models cost 0 and are reported
as unpriced rather than guessed.
"""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from carebench.types import CarebenchError, Usage

LOCAL_PROVIDERS = {"llamacpp", "replay"}


@lru_cache(maxsize=1)
def price_table() -> dict[str, tuple[float, float]]:
    table: dict[str, tuple[float, float]] = {}
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
            if not (isinstance(pair, list) and len(pair) == 2):
                raise CarebenchError(f"price for {name!r} must be [input, output] per 1M tokens")
            table[name] = (float(pair[0]), float(pair[1]))
    return table


def price_for(spec: str) -> tuple[float, float]:
    """(input, output) USD per 1M tokens for a model spec; (0, 0) when unknown or local."""
    provider, _, model = spec.partition(":")
    if provider in LOCAL_PROVIDERS:
        return (0.0, 0.0)
    model = model.split("@", 1)[0]
    best = ""
    for name in price_table():
        if model.startswith(name) and len(name) > len(best):
            best = name
    return price_table()[best] if best else (0.0, 0.0)


def is_priced(spec: str) -> bool:
    provider, _, model = spec.partition(":")
    return provider in LOCAL_PROVIDERS or any(
        model.split("@", 1)[0].startswith(n) for n in price_table()
    )


def cost_usd(spec: str, usage: Usage) -> float:
    p_in, p_out = price_for(spec)
    return (usage.prompt_tokens * p_in + usage.completion_tokens * p_out) / 1e6

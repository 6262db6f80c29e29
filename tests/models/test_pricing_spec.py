"""Pricing reads a parsed ``ModelSpec``: a model's price is its provider and name's,
whatever server (``@base_url``) it is reached at and whether it is given as a string or
as the object. Expected prices come from the price table file itself, read here with
``tomllib``, never from the pricing functions."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import carebench.models
from carebench.models.base import ModelSpec
from carebench.models.pricing import batch_price, call_cost_bound, cost_usd, is_priced, price_for
from carebench.types import CarebenchError, ChatRequest, Message, Usage

PRICES = tomllib.loads((Path(carebench.models.__file__).parent / "prices.toml").read_text("utf-8"))
URL = "http://gateway.internal:8000/v1"


def _forms(provider: str, name: str) -> list[ModelSpec | str]:
    """The same model named four ways: string or object, with or without a server."""
    return [f"{provider}:{name}", f"{provider}:{name}@{URL}", ModelSpec(provider, name),
            ModelSpec(provider, name, URL)]


@pytest.mark.parametrize("name", sorted(PRICES["models"]))
def test_every_listed_model_prices_the_same_with_and_without_a_base_url(name):
    pair = PRICES["models"][name]
    for spec in _forms("openai", name):
        assert price_for(spec) == (pair[0], pair[1]), spec
        assert is_priced(spec)
        # 1M prompt tokens and 1M completion tokens cost exactly the listed pair
        assert cost_usd(spec, Usage(1_000_000, 1_000_000)) == pytest.approx(pair[0] + pair[1])
        # no [batch] line in the built-in file: half the live price
        assert batch_price(spec) == pytest.approx((pair[0] / 2, pair[1] / 2, 0.0))


@pytest.mark.parametrize("alias", sorted(PRICES["aliases"]))
def test_aliases_price_as_their_model_with_and_without_a_base_url(alias):
    pair = PRICES["models"][PRICES["aliases"][alias]]
    for spec in _forms("anthropic" if alias.startswith("claude") else "openai", alias):
        assert price_for(spec) == (pair[0], pair[1]), spec


def test_the_worst_case_bound_ignores_the_server():
    pair = PRICES["models"]["gpt-4o-mini"]
    req = ChatRequest((Message("user", "x" * 400),), max_tokens=1000)
    # by hand: 400 characters -> 100 tokens, plus 4 per message; 1000 output tokens
    want = (104 * pair[0] + 1000 * pair[1]) / 1e6
    for spec in _forms("openai", "gpt-4o-mini"):
        assert call_cost_bound(spec, req) == pytest.approx(want)


def test_unlisted_local_and_malformed_specs():
    for spec in _forms("openai", "gpt-5.5"):  # not gpt-5: never priced by prefix
        assert price_for(spec) is None and cost_usd(spec, Usage(10, 10)) is None
    for spec in ("llamacpp:builtin", "replay:/runs/x@y", ModelSpec("llamacpp", "/m/a.gguf")):
        assert price_for(spec) == (0.0, 0.0)
    with pytest.raises(CarebenchError, match="malformed model spec"):
        price_for("gpt-4o")  # no provider: refused, not guessed


def test_a_user_batch_price_applies_behind_any_server(tmp_path, monkeypatch):
    from carebench.models.pricing import price_table

    f = tmp_path / "prices.toml"
    f.write_text('[models]\n"my-model" = [2.0, 6.0]\n[batch]\n"my-model" = [0.5, 1.0]\n')
    monkeypatch.setenv("CAREBENCH_PRICES", str(f))
    price_table.cache_clear()
    for spec in _forms("openai", "my-model"):
        assert price_for(spec) == (2.0, 6.0)
        assert batch_price(spec) == (0.5, 1.0, 0.0)

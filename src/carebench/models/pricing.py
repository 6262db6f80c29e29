"""Price table: turns token usage into dollars, so every report can state its cost.

Built-in list prices live in ``prices.toml``; users extend or override them with
their own TOML file (``CAREBENCH_PRICES``). A price is ``[input, output]`` USD per 1M
tokens, optionally with a third number, a flat USD price per call (gateways and
endpoints that bill per request).

A model is priced only by its exact name or by an alias the table lists (e.g. a
dated snapshot): never by prefix, because ``gpt-5.5`` is not ``gpt-5``. An unknown
remote model is *unpriced*: its cost is ``None`` (null in JSON, "unpriced" in
reports), never an invented $0. In-process and replayed models cost nothing.

Batch prices (what a call costs through a provider's batch endpoint, see
``carebench batch``) default to half the live price, as OpenAI's Batch API and
Anthropic's Message Batches bill; a ``[batch]`` table sets them per model
(``"gpt-4o" = [1.25, 5.00]``), in the built-in file or ``CAREBENCH_PRICES``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from carebench.models.base import ModelSpec, SpecLike, parse_spec
from carebench.types import CarebenchError, ChatRequest, Usage

LOCAL_PROVIDERS = {"llamacpp", "replay"}
Price = tuple[float, float, float]  # input, output USD per 1M tokens; USD per call


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, Price]  # model name -> price
    aliases: dict[str, str]  # alias -> model name in ``prices``
    batch: dict[str, Price] = field(default_factory=dict)  # model name -> batch price
    #: (spec, batch) -> resolved price, filled on first use (a spec's price is looked up per call)
    memo: dict[tuple[SpecLike, bool], Price | None] = field(default_factory=dict, compare=False, repr=False)


def _read(text: str, where: str, table: PriceTable) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CarebenchError(f"invalid price file {where}: {e}") from None
    for section, into in (("models", table.prices), ("batch", table.batch)):
        for name, pair in (data.get(section) or {}).items():
            if not (isinstance(pair, list) and len(pair) in (2, 3)
                    and all(isinstance(x, int | float) for x in pair)):
                raise CarebenchError(
                    f"{where}: {'batch ' * (section == 'batch')}price for {name!r} must be "
                    "[input, output] per 1M tokens, optionally followed by a price per call"
                )
            into[name] = (float(pair[0]), float(pair[1]), float(pair[2]) if len(pair) == 3 else 0.0)
    for alias, name in (data.get("aliases") or {}).items():
        if not isinstance(name, str):
            raise CarebenchError(f"{where}: alias {alias!r} must name a model")
        table.aliases[alias] = name


@lru_cache(maxsize=1)
def price_table() -> PriceTable:
    table = PriceTable({}, {})
    _read(resources.files("carebench.models").joinpath("prices.toml").read_text("utf-8"),
          "prices.toml (built in)", table)
    user = os.environ.get("CAREBENCH_PRICES")
    if user:
        try:
            text = Path(user).read_text("utf-8")
        except OSError as e:
            raise CarebenchError(f"cannot read price file {user}: {e.strerror}") from None
        _read(text, user, table)
    for alias, name in table.aliases.items():
        if name not in table.prices:
            raise CarebenchError(f"price alias {alias!r} names {name!r}, which has no price")
    for name in table.batch:
        if name not in table.prices and name not in table.aliases:
            raise CarebenchError(f"batch price for {name!r}, which has no live price")
    return table


def _prices(spec: SpecLike, batch: bool = False) -> Price | None:
    """The live price of a spec, or with ``batch`` its batch price (default half the live one).

    Memoised per spec as given (its string or the object): both name one provider and model,
    and the price depends on nothing else, so a string is parsed only on its first lookup."""
    memo = price_table().memo
    k = (spec, batch)
    if k not in memo:
        memo[k] = _resolve(spec if isinstance(spec, ModelSpec) else parse_spec(spec), batch)
    return memo[k]


def _resolve(spec: ModelSpec, batch: bool) -> Price | None:
    """The price of a spec's provider and model name (its ``base_url`` plays no part)."""
    if spec.provider in LOCAL_PROVIDERS:
        return (0.0, 0.0, 0.0)
    table = price_table()
    model = spec.model
    name = model if model in table.prices else table.aliases.get(model)
    if name is None:
        return None
    if batch:
        own = table.batch.get(model) or table.batch.get(name)
        return own if own is not None else tuple(x / 2 for x in table.prices[name])  # type: ignore[return-value]
    return table.prices[name]


def batch_price(spec: SpecLike) -> Price | None:
    """(input, output per 1M tokens, per call) USD through a batch endpoint; None when unpriced."""
    return _prices(spec, batch=True)


def price_for(spec: SpecLike) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens; (0, 0) for local models; None when unpriced."""
    p = _prices(spec)
    return None if p is None else p[:2]


def is_priced(spec: SpecLike) -> bool:
    return _prices(spec) is not None


def cost_usd(spec: SpecLike, usage: Usage) -> float | None:
    """Cost of one call, or None when the model is unpriced."""
    p = _prices(spec)
    if p is None:
        return None
    return (usage.prompt_tokens * p[0] + usage.completion_tokens * p[1]) / 1e6 + p[2]


def cost_fields(spec: SpecLike, usage: Usage) -> dict[str, float | bool]:
    """``Completion`` keyword arguments for the cost of one call (``priced`` False when unknown)."""
    cost = cost_usd(spec, usage)
    return {"cost_usd": 0.0 if cost is None else cost, "priced": cost is not None}


def unpriced_note(specs: list[str] | set[str]) -> str:
    """The one sentence every report and dry run uses for unpriced models."""
    names = ", ".join(sorted(specs))
    return (f"unpriced: {names} (not in the price table, so no cost is shown; add exact prices "
            "with CAREBENCH_PRICES=/path/prices.toml)")


def estimate_tokens(text: str) -> int:
    """Rough token count (about four characters per token) for cost estimates only."""
    return max(1, len(text) // 4)


#: output tokens assumed for a request without ``max_tokens`` when bounding its cost
UNCAPPED_OUTPUT_TOKENS = 4096


def call_cost_bound(spec: SpecLike, request: ChatRequest, output_tokens: int | None = None,
                    batch: bool = False) -> float:
    """A call's cost from its prompt length and ``output_tokens`` replied (default: the
    request's output cap, i.e. the worst case the budget must reserve), at the batch price
    with ``batch``. An unpriced model bounds at 0: callers that enforce a budget must
    refuse unpriced models (``is_priced``)."""
    p = _prices(spec, batch)
    if p is None:
        return 0.0
    p_in, p_out, per_call = p
    if not (p_in or p_out):
        return per_call
    prompt = sum(estimate_tokens(m.content) + 4 for m in request.messages)
    out = output_tokens if output_tokens is not None else (request.max_tokens or UNCAPPED_OUTPUT_TOKENS)
    return (prompt * p_in + out * p_out) / 1e6 + per_call


def calls_cost_bound(spec: SpecLike, requests: list[ChatRequest], cap: int | None = None,
                     batch: bool = False) -> float:
    """The sum of :func:`call_cost_bound` over one model's requests, each at its output cap
    (``cap``, the model's own option, replaces the requests' caps), in one pass (a batch
    round's worst case is a million of them)."""
    p = _prices(spec, batch)
    if p is None or not requests:
        return 0.0
    p_in, p_out, per_call = p
    if not (p_in or p_out):
        return per_call * len(requests)
    prompt = sum(max(1, len(m.content) // 4) + 4 for r in requests for m in r.messages)  # estimate_tokens
    out = cap * len(requests) if cap is not None else sum(r.max_tokens or UNCAPPED_OUTPUT_TOKENS for r in requests)
    return (prompt * p_in + out * p_out) / 1e6 + per_call * len(requests)

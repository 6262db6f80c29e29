"""One full name per evaluated system, shared by every report, compare and leaderboard.

A system is what produced a run's answers: the method and its options, plus the model
spec and the request options that change the model's answers (temperature, max_tokens,
...). Its identity is one string built from those parts, so two runs of one method on
two models, or of ``llm`` and ``llm:variant=conservative``, never share a name, and a
leaderboard joins runs on it. The parts are read from what a run directory already holds
(records and manifest); a part a run did not record is left out, so an old run's system
falls back to its method name.

Form: ``METHOD[:key=value,...][@MODEL][ {key=value,...}]``, e.g.
``llm:variant=conservative@openai:gpt-4o-mini {temperature=0}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{k}={_value(x)}" for k, x in sorted(v.items())) + "}"
    return str(v)


def options_text(options: Mapping[str, Any] | None) -> str:
    """``key=value,...`` in key order ('' when there are none)."""
    return ",".join(f"{k}={_value(v)}" for k, v in sorted((options or {}).items()))


def system_identity(method: str, options: Mapping[str, Any] | None = None, model: str | None = None,
                    model_options: Mapping[str, Any] | None = None) -> str:
    """The full name of a system: method, its options, the model and its answer-changing options."""
    name = str(method)
    if options:
        name += ":" + options_text(options)
    if model:
        name += f"@{model}"
    if model_options:
        name += " {" + options_text(model_options) + "}"
    return name


def display_names(identities: Mapping[str, str], methods: Mapping[str, str] | None = None) -> dict[str, str]:
    """A short name per system of one run: its method name when no other system of the run
    has that method, else its full identity. Two systems never share one (a clash left by
    two identical identities is resolved by the run's own key)."""
    methods = dict(methods or {})
    count: dict[str, int] = {}
    for key in identities:
        m = methods.get(key, key)
        count[m] = count.get(m, 0) + 1
    out = {key: (methods.get(key, key) if count[methods.get(key, key)] == 1 else ident)
           for key, ident in identities.items()}
    seen: dict[str, int] = {}
    for v in out.values():
        seen[v] = seen.get(v, 0) + 1
    return {k: (v if seen[v] == 1 else f"{v} ({k})") for k, v in out.items()}

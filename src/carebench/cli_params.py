"""Several Typer options handed to a command as one value.

Typer maps one parameter to one option. :func:`expand` lets a command declare one
parameter (marked by a :class:`Slot` default) and receive one built value, while
``--help`` shows the options it stands for, in its place. The shared run flags
(:func:`carebench.engine.options.run_flags`) and ``carebench compare``'s pairing options
(one per suite in the suite table) are declared this way, once.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any


class Slot:
    """The default that marks the parameter standing for several options."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def expand(func: Callable, options: Mapping[str, tuple[Any, Any]],
           build: Mapping[Slot, Callable[[dict[str, Any]], Any]]) -> Callable:
    """``func`` with its parameters defaulting to a slot of ``build`` replaced by
    ``options`` (parameter name -> (Typer annotation, default)), placed where the first
    such parameter stands; each slot's parameter receives ``build[slot](values)``."""
    hints = typing.get_type_hints(func, include_extras=True)
    params: list[inspect.Parameter] = []
    slots: dict[str, Slot] = {}  # parameter name -> the slot it receives
    for p in inspect.signature(func).parameters.values():
        if not (isinstance(p.default, Slot) and p.default in build):
            params.append(p.replace(annotation=hints.get(p.name, p.annotation)))
            continue
        if not slots:
            params += [inspect.Parameter(n, p.kind, default=default, annotation=annotation)
                       for n, (annotation, default) in options.items()]
        slots[p.name] = p.default
    if not slots:
        raise TypeError(f"{func.__name__}: no parameter defaults to {' or '.join(map(repr, build))}")

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        values = {n: kwargs.pop(n) for n in options}
        return func(**kwargs, **{name: build[slot](values) for name, slot in slots.items()})

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command

"""Check a request line against a provider SDK's own request TypedDicts, strictly.

The SDKs' request types are ``TypedDict`` s, which accept unknown keys at runtime; here a
key the type does not declare is an error (a parameter the API version does not take),
a ``Required`` key must be present, and every value is validated by pydantic against
the declared type, iterables consumed so that their items are checked too.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, NotRequired, Required

from pydantic import TypeAdapter, ValidationError
from typing_extensions import is_typeddict


def _strip(tp: Any) -> tuple[Any, bool | None]:
    """(the type inside Required/NotRequired/Annotated, whether it is required if said)."""
    req = None
    while True:
        origin = typing.get_origin(tp)
        if origin is Required:
            req, tp = True, typing.get_args(tp)[0]
        elif origin is NotRequired:
            req, tp = False, typing.get_args(tp)[0]
        elif origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        else:
            return tp, req


def typed_dict_errors(value: Any, td: Any, path: str = "$") -> list[str]:
    """Why ``value`` is not a ``td`` (a TypedDict, a Union of them, or any type)."""
    tp, _ = _strip(td)
    origin = typing.get_origin(tp)
    if origin is typing.Union or (origin is not None and str(origin) == "types.UnionType"):
        options = [typed_dict_errors(value, a, path) for a in typing.get_args(tp)]
        return [] if any(not o for o in options) else min(options, key=len)
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}"]
        hints = typing.get_type_hints(tp, include_extras=True)
        out = [f"{path}.{k}: {tp.__name__} has no such field (not a parameter of this API version)"
               for k in value if k not in hints]
        for k, h in hints.items():
            inner, req = _strip(h)
            if req is None:
                req = tp.__total__
            if k not in value:
                if req:
                    out.append(f"{path}.{k}: required by {tp.__name__}")
                continue
            out += typed_dict_errors(value[k], inner, f"{path}.{k}")
        return out
    if origin in (Iterable, typing.Iterable) or (origin is not None and getattr(origin, "__name__", "") in
                                                  ("Iterable", "SequenceNotStr")):
        (item,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [e for i, v in enumerate(value) for e in typed_dict_errors(v, item, f"{path}[{i}]")]
    try:
        got = TypeAdapter(tp).validate_python(value)
        if isinstance(got, Iterable) and not isinstance(got, str | bytes | dict):
            list(got)
    except ValidationError as e:
        return [f"{path}: {e.errors()[0]['msg']}"]
    return []

"""A carebench task's bad input under ``inspect eval``: one line, not a Python traceback.

Inspect's command line prints a ``PrerequisiteError`` as its message alone (its exception
hook) and any other exception raised while a task is built as a full traceback. A task
body wrapped in :func:`task_errors` turns carebench's user errors (a ``-T data=`` path that
does not exist, an unknown method, a malformed rubric) into :class:`TaskInputError`, which
is both: Inspect shows the one line ``carebench/TASK: message``, and a Python caller of
``inspect_ai.eval`` can still catch it as a :class:`~carebench.types.CarebenchError`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from carebench.types import CarebenchError

try:  # Inspect's own "print the message, not the traceback" error (not part of its public API)
    from inspect_ai._util.error import PrerequisiteError as _Base
except ImportError:  # pragma: no cover - a future inspect-ai that moved it: the error stays a CarebenchError
    _Base = Exception  # type: ignore[misc,assignment]

F = TypeVar("F", bound=Callable[..., Any])


class TaskInputError(_Base, CarebenchError):  # type: ignore[misc,valid-type]
    """A carebench task's bad input, as Inspect reports a prerequisite that is not met."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.text = message
        # Inspect's hook prints ``message`` with rich, which reads brackets as markup: escape them
        try:
            from rich.markup import escape
        except ImportError:  # pragma: no cover - rich comes with inspect-ai
            escape = str  # type: ignore[assignment]
        self.message = escape(message)

    def __str__(self) -> str:
        return self.text


def task_errors(name: str) -> Callable[[F], F]:
    """Decorate a task function: its ``CarebenchError`` becomes ``carebench/NAME: message``
    (:class:`TaskInputError`), raised without the chained traceback."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def task_fn(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except TaskInputError:
                raise
            except CarebenchError as e:
                raise TaskInputError(f"carebench/{name}: {e}") from None

        return task_fn  # type: ignore[return-value]

    return wrap


def require_roles(roles: list[str], what: str) -> None:
    """Refuse to build a task whose model ``roles`` are not bound (``--model-role ROLE=...``):
    Inspect would give an unbound role the evaluated model, which would then play ``what``
    (its own simulated user, its own judge) without a word. Call it in the task function,
    where Inspect has bound the run's roles already."""
    from inspect_ai.model import model_roles

    bound = model_roles()
    missing = [r for r in dict.fromkeys(roles) if r not in bound]
    if missing:
        raise CarebenchError(f"bind {what} to models: " + " ".join(f"--model-role {r}=PROVIDER/MODEL" for r in missing)
                             + " (the model under test is --model)")

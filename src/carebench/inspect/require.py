"""The one line a user without the extra gets, instead of an ImportError's traceback."""

from __future__ import annotations

from carebench.types import CarebenchError

INSTALL_HINT = "this needs UK AISI's Inspect: pip install 'carebench[inspect]'"


def require_inspect() -> None:
    """Raise the one-line error when ``inspect_ai`` cannot be imported."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise CarebenchError(INSTALL_HINT) from None

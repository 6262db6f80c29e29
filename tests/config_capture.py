"""A stand-in for a command's run function, for tests of what the command line builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carebench.types import CarebenchError


def capture_config(seen: dict[str, Any], name: str) -> Callable[..., Any]:
    """Records the config a command hands its run function under ``name``, then stops the
    command with a user error (exit 2), so nothing runs and nothing is written."""
    def fake(cfg: Any, *args: Any, **kwargs: Any) -> Any:
        seen[name] = cfg
        raise CarebenchError("stopped by the test")
    return fake

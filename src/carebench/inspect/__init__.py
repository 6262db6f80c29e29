"""carebench under UK AISI's Inspect (the optional extra ``carebench[inspect]``).

Nothing here is imported by carebench's core: the suites' Inspect tasks are registered
through the ``inspect_ai`` entry point (``carebench._registry``), and ``carebench export
inspect`` / ``import inspect`` import Inspect only when they run. ``from carebench.inspect
import resource_routing`` loads Inspect on first use of the name, not with the package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["resource_routing"]


def __getattr__(name: str) -> Any:
    if name == "resource_routing":
        from carebench.inspect.routing import resource_routing

        return resource_routing
    raise AttributeError(f"module 'carebench.inspect' has no attribute {name!r}")

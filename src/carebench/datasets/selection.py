"""Keeping the items a user named by id (``--task-id``, ``--persona-id``), in the order named.

Why one function: every suite that takes ids on the command line must refuse an id
that is not in the loaded set with the same one line, never silently run fewer items.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from carebench.types import CarebenchError

T = TypeVar("T")


def select_ids(items: Sequence[T], ids: Sequence[str], source: str | Path, what: str) -> list[T]:
    """The items whose ``id`` is in ``ids``, in the order of ``ids``; an unknown id is a
    CarebenchError naming ``source`` and the first such id."""
    by_id: dict[str, Any] = {item.id: item for item in items}  # type: ignore[attr-defined]
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise CarebenchError(f"{source}: no {what} with id {missing[0]!r}")
    return [by_id[i] for i in ids]

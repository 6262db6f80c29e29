"""Where a registry comes from: the snapshot shipped with carebench, or a user's file.

The built-in snapshot (``carebench/data/resources/builtin.json``, carebench's own
format) is built by ``scripts/build_resources.py`` from open-helplines (CC0) and
official sources named per entry; docs/resources.md gives its sources and dates.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources as importlib_resources
from pathlib import Path

from carebench.resources.formats import parse_carebench_json, read_registry
from carebench.resources.registry import Registry

BUILTIN_FILE = "builtin.json"


@lru_cache(maxsize=1)
def builtin_registry() -> Registry:
    """The snapshot shipped with carebench (read once per process)."""
    text = (importlib_resources.files("carebench") / "data" / "resources" / BUILTIN_FILE).read_text("utf-8")
    return parse_carebench_json(text, origin="builtin")


def load_registry(path: str | Path | None) -> Registry:
    """``--resources FILE``: the registry at ``path`` (carebench JSON, CSV or an open-helplines
    directory); ``None``: the built-in snapshot. Rows the reader skipped (a number shorter than
    a registry may list) are each named on stderr once, with file, line and reason."""
    if path is None:
        return builtin_registry()
    reg = read_registry(path)
    for w in reg.warnings:
        print(f"carebench: warning: {w}", file=sys.stderr)
    return reg

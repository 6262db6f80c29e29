"""Data files shipped inside the package, named ``builtin:NAME`` on the command line.

One resolver for every suite, so a built-in name is looked up, checked and reported
the same way everywhere (an unknown name lists the known ones), and a path that does
not exist is one clear error before any model call.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from carebench.types import CarebenchError

PREFIX = "builtin:"


def package_file(folder: str, filename: str) -> Path:
    """A file under ``carebench/data/<folder>/``."""
    return Path(str(resources.files("carebench") / "data" / folder / filename))


def builtin_specs(folder: str, suffix: str = ".jsonl") -> list[str]:
    """``builtin:NAME`` of every ``NAME<suffix>`` data file under ``carebench/data/<folder>/``,
    read from the package so help texts never name a data set that is not shipped."""
    root = resources.files("carebench") / "data" / folder
    return sorted(f"{PREFIX}{p.name[: -len(suffix)]}" for p in root.iterdir() if p.name.endswith(suffix))


def builtin_name(spec: str | Path) -> str | None:
    """``NAME`` of a ``builtin:NAME`` spec; ``None`` for anything else."""
    s = str(spec)
    return s[len(PREFIX):] if s.startswith(PREFIX) else None


def builtin_file(folder: str, name: str, files: Mapping[str, str], what: str = "built-in") -> Path:
    """The package file ``files[name]`` under ``folder``; an unknown name is an error
    that lists the known ones."""
    try:
        fname = files[name]
    except KeyError:
        raise CarebenchError(f"unknown {what} {name!r}; known: {', '.join(sorted(files))}") from None
    return package_file(folder, fname)


def resolve_input(spec: str | Path, folder: str, files: Mapping[str, str], what: str = "built-in") -> Path:
    """``builtin:NAME`` -> the package file; anything else is a path that must exist."""
    name = builtin_name(spec)
    if name is not None:
        return builtin_file(folder, name, files, what)
    p = Path(str(spec))
    if not p.exists():
        raise CarebenchError(f"{p}: file not found")
    return p

"""Prompt templates of the risk suite, one ``.txt`` file per prompt (package data),
rendered by the core renderer (:mod:`carebench.templates`).

``--prompts DIR`` replaces any of these files with the user's own (same file names,
same placeholders), e.g. to run the clinician prompt a paper's authors released. The
set in force is identified by :func:`prompt_set`'s hash in the manifest and report.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from carebench import templates
from carebench.types import CarebenchError

_overrides: dict[str, str] = {}  # name -> text, set only inside ``using_prompts``


def template_names() -> list[str]:
    """The package's template names (``rubric``, ``post``, ...)."""
    return sorted(p.name[:-4] for p in resources.files(__name__).iterdir() if p.name.endswith(".txt"))


def load_prompt(name: str) -> str:
    """The text of template ``name`` (file ``name.txt``), without its trailing newline."""
    if name in _overrides:
        return _overrides[name]
    return templates.package_template(__name__, name)


def placeholders(name: str) -> set[str]:
    """The placeholder names a template uses (the package's version defines them)."""
    return templates.placeholders(templates.package_template(__name__, name))


def render(name: str, **values: str) -> str:
    """Fill a template's placeholders; every placeholder must be given (no silent gaps)."""
    return templates.fill(load_prompt(name), values, name)


def join(*names: str) -> str:
    """Concatenate templates into one prompt, separated by blank lines."""
    return "\n\n".join(load_prompt(n) for n in names)


def read_prompt_dir(path: str | Path) -> dict[str, str]:
    """The ``*.txt`` files of a prompt directory, checked against the package's templates.

    Every file must replace a known template and use exactly its placeholders, so a
    typo in a file name or a lost ``{post}`` fails before any model call.
    """
    root = Path(path)
    if not root.is_dir():
        raise CarebenchError(f"--prompts: not a directory: {root}")
    known = set(template_names())
    out: dict[str, str] = {}
    for f in sorted(root.glob("*.txt")):
        name = f.stem
        if name not in known:
            raise CarebenchError(
                f"--prompts: {f.name} replaces no template; known: {', '.join(sorted(known))}")
        text = f.read_text(encoding="utf-8").rstrip("\n")
        want, got = placeholders(name), templates.placeholders(text)
        if want != got:
            raise CarebenchError(
                f"--prompts: {f.name} must use the placeholders {sorted(want) or 'none'}, "
                f"found {sorted(got) or 'none'}")
        out[name] = text
    if not out:
        raise CarebenchError(f"--prompts: no .txt prompt files in {root}")
    return out


@contextlib.contextmanager
def using_prompts(overrides: dict[str, str] | None) -> Iterator[None]:
    """Use ``overrides`` (from :func:`read_prompt_dir`) for the duration of a run."""
    global _overrides
    saved = _overrides
    _overrides = dict(overrides or {})
    try:
        yield
    finally:
        _overrides = saved


def prompt_set(source: str | None = None) -> dict[str, Any]:
    """What the manifest records: the SHA-256 of every template in force (name and text),
    which ones were replaced, and from where."""
    h = hashlib.sha256()
    for name in template_names():
        h.update(f"{name}\0{load_prompt(name)}\0".encode())
    return {"sha256": h.hexdigest(), "replaced": sorted(_overrides), "source": source}

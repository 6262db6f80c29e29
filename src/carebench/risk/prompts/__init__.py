"""Prompt templates of the risk suite, one ``.txt`` file per prompt (package data),
rendered by the core renderer (:mod:`carebench.templates`)."""

from __future__ import annotations

from carebench import templates


def load_prompt(name: str) -> str:
    """The text of template ``name`` (file ``name.txt``), without its trailing newline."""
    return templates.package_template(__name__, name)


def placeholders(name: str) -> set[str]:
    """The placeholder names a template uses."""
    return templates.placeholders(load_prompt(name))


def render(name: str, **values: str) -> str:
    """Fill a template's placeholders; every placeholder must be given (no silent gaps)."""
    return templates.fill(load_prompt(name), values, name)


def join(*names: str) -> str:
    """Concatenate templates into one prompt, separated by blank lines."""
    return "\n\n".join(load_prompt(n) for n in names)

"""Prompt templates: one renderer for every suite.

Templates are package text files with ``{name}`` placeholders, so a reviewer (or a
clinician) can read and diff the exact wording sent to models. :func:`fill`
substitutes every placeholder in one pass, so braces inside a post, a transcript or
JSON shown to the model are never re-read as placeholders, and a placeholder left
without a value is an error rather than a silent gap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

from carebench.types import CarebenchError

PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@cache
def package_template(package: str, name: str, keep_newline: bool = False) -> str:
    """The text of ``name.txt`` in ``package`` (e.g. ``carebench.risk.prompts``), without
    its trailing newline unless ``keep_newline`` (changing a prompt's bytes changes its
    cache key, so each suite keeps the form its cached calls were made with)."""
    try:
        text = resources.files(package).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CarebenchError(f"unknown prompt template {name!r} in {package}") from None
    return text if keep_newline else text.rstrip("\n")


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def fill(text: str, values: Mapping[str, str], name: str = "template") -> str:
    """Every placeholder of ``text`` replaced by its value, in one pass.

    Strict both ways: a placeholder without a value and a value without a placeholder
    are errors (the second is a renamed slot whose text would silently go missing)."""
    slots = placeholders(text)
    missing = slots - values.keys()
    if missing:
        raise CarebenchError(f"prompt {name!r} needs values for {sorted(missing)}")
    unknown = values.keys() - slots
    if unknown:
        raise CarebenchError(f"prompt {name!r} has no placeholder for {sorted(unknown)}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def fill_some(text: str, values: Mapping[str, str], name: str = "template") -> str:
    """The placeholders named in ``values`` replaced in one pass, every other one left
    as it is: for a template filled in two stages (an outside persona frame gets its
    context now and its persona fields per conversation). A value without a placeholder
    is still an error."""
    unknown = values.keys() - placeholders(text)
    if unknown:
        raise CarebenchError(f"prompt {name!r} has no placeholder for {sorted(unknown)}")
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def prompt(name: str, keep_newline: bool = False) -> str:
    """A prompt file of the shared folder ``carebench/prompts`` (see :func:`package_template`)."""
    return package_template("carebench.prompts", name, keep_newline)

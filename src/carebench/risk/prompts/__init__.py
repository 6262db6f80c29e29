"""Prompt templates of the risk suite, one ``.txt`` file per prompt (package data).

Templates live in files rather than code so a reviewer (or a clinician) can read and
diff the exact wording sent to models. Placeholders are ``{name}``; ``render``
substitutes them in one pass, so braces inside a post (or inside JSON shown to the
model) are never re-interpreted as placeholders.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from carebench.types import CarebenchError

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@cache
def load_prompt(name: str) -> str:
    """The text of template ``name`` (file ``name.txt``), without its trailing newline."""
    try:
        text = resources.files(__name__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CarebenchError(f"unknown risk prompt template {name!r}") from None
    return text.rstrip("\n")


def placeholders(name: str) -> set[str]:
    """The placeholder names a template uses."""
    return set(_PLACEHOLDER.findall(load_prompt(name)))


def render(name: str, **values: str) -> str:
    """Fill a template's placeholders; every placeholder must be given (no silent gaps)."""
    text = load_prompt(name)
    missing = placeholders(name) - values.keys()
    if missing:
        raise CarebenchError(f"prompt {name!r} needs values for {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def join(*names: str) -> str:
    """Concatenate templates into one prompt, separated by blank lines."""
    return "\n\n".join(load_prompt(n) for n in names)

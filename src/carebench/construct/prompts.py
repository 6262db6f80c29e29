"""The construction pipeline's prompts: package files ``carebench/prompts/construct_*.txt``
(carebench's own wording), filled in one pass by :func:`carebench.templates.fill`.

Each system prompt opens with a distinct first line so recorded calls are easy to tell
apart (and scripted test servers can route on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carebench.templates import fill, prompt

NO_PERSONA = "(no persona)"


def system_prompt(step: str, **values: str) -> str:
    """The system prompt of a step: screen, sketch, pick, rewrite, revise or judge."""
    name = f"construct_{step}_system"
    return fill(prompt(name), values, name)


def user_prompt(name: str, **values: str) -> str:
    name = f"construct_{name}"
    return fill(prompt(name), values, name)


def persona_block(text: str, attributes: dict) -> str:
    attrs = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in attributes.items())
    return f"{text}\n({attrs})" if attrs else text


def row_persona(row: Any) -> str:
    """The persona block of a routed row, or a marker when routing gave it none."""
    return persona_block(row.persona.text, row.persona.attributes) if row.persona else NO_PERSONA


def text_prompt(text: str) -> str:
    """The user message of the steps that read one text (screening, persona sketches)."""
    return user_prompt("text_user", text=text)


def pick_prompt(text: str, candidates: Sequence[Any], inferred: dict[str, Any]) -> str:
    """The persona pick: the text, what it suggests about its author, numbered candidates."""
    listing = "\n\n".join(f"{j + 1}. {persona_block(p.text, p.attributes)}" for j, p in enumerate(candidates))
    hint = "; ".join(f"{k}: {v}" for k, v in inferred.items())
    return user_prompt("pick_user", text=text, candidates=listing,
                       hint=user_prompt("pick_hint", hint=hint) + "\n\n" if hint else "")

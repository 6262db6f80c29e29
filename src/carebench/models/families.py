"""Vendor families of model specs.

Judges from a responder's own vendor family may prefer its replies, so the
support panel's self-preference analysis and the plural jury's overlap warning
need to know which specs belong together. The guess comes from the spec; a
mapping from the user (``--family SPEC=NAME``) overrides it for models behind a
proxy or a local server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from carebench.models.base import parse_spec
from carebench.types import CarebenchError

FamilyMap = Mapping[str, str] | Callable[[str], str] | None


def family_of(spec: str, mapping: FamilyMap = None) -> str:
    """Vendor family of a model spec, for own-family (self-preference) analyses.

    ``mapping`` may be a dict (spec -> family; unmapped specs fall back to the
    default) or a callable. Default: provider plus the first token of the model
    name, e.g. ``openai:gpt-4o-mini`` -> ``openai:gpt``,
    ``anthropic:claude-3-5-haiku`` -> ``anthropic:claude``; any ``@base_url`` and
    directory part are ignored.
    """
    if callable(mapping):
        return str(mapping(spec))
    if mapping is not None and spec in mapping:
        return str(mapping[spec])
    try:  # the spec's own fields (records and labels hold its text)
        ms = parse_spec(spec)
    except CarebenchError:  # no spec: a bare name (the references) or an unknown provider's
        provider, _, model = spec.partition(":") if ":" in spec else ("", "", spec)
    else:
        provider, model = ms.provider, ms.model
        model = model.rstrip("/").rsplit("/", 1)[-1] if provider in ("llamacpp", "replay") else model
    token = re.split(r"[-_./: ]", model.strip(), maxsplit=1)[0].lower() or model.lower()
    return f"{provider}:{token}" if provider else token


def parse_family_overrides(values: list[str] | None, option: str = "--family") -> dict[str, str]:
    """``SPEC=NAME`` strings (a CLI option repeated) as a spec -> family mapping."""
    out: dict[str, str] = {}
    for v in values or []:
        spec, sep, name = v.rpartition("=")
        if not sep or not spec.strip() or not name.strip():
            raise CarebenchError(f"{option} expects SPEC=NAME, got {v!r}")
        out[spec.strip()] = name.strip()
    return out


def panel_independence(judges: list[str], responders: list[str], mapping: FamilyMap = None) -> list[str]:
    """Why a judge panel is less independent than its size says, one sentence per case:
    seats that are one model (at temperature 0 they share one cached answer), a judge that
    is a responder, and a judge of a responder's vendor family. Empty when none applies."""
    out = []
    counts: dict[str, int] = {}
    for j in judges:
        counts[j] = counts.get(j, 0) + 1
    for j, n in counts.items():
        if n > 1:
            out.append(f"{n} of the {len(judges)} judge seats are the same model {j}: at temperature 0 "
                       "they give one shared answer, so the panel has fewer independent judges than seats")
    for j in counts:
        for r in responders:
            if j == r:
                out.append(f"judge {j} is also a responder: it grades its own replies (self-preference)")
            elif family_of(j, mapping) == family_of(r, mapping):
                out.append(f"judge {j} and responder {r} share the vendor family {family_of(j, mapping)!r}: "
                           "the judge may prefer its own family's replies (self-preference); "
                           "set --family SPEC=NAME if the guess is wrong")
    return out

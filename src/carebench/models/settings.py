"""Per-responder generation settings (temperature, output cap, top_p): ``SPEC:key=value`` and files.

Benchmarks run models with different decoding settings (DistressBench, Appendix G:
seven models sampled at temperature 1 because their proxy accepts nothing else,
higher output caps for verbose models), so settings are given per model spec:

* on the command line, ``SPEC:key=value`` (repeatable), e.g.
  ``openai:gpt-4o@http://host:8000/v1:temperature=1``. The spec is everything
  before the *last* colon, so specs with URLs and ports work;
* in a settings file (``.toml`` or ``.json``): a table per spec,
  ``["openai:gpt-4o"]`` with ``temperature = 1`` and ``max_tokens = 8192``.

These are the values a responder is *sampled* with (part of each request);
provider-level body overrides for reasoning endpoints are
:mod:`carebench.models.options`. Command-line options override the file. Unknown keys, bad values and options for
a spec that is not in the run are user errors (one line, no traceback).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.types import CarebenchError


@dataclass(frozen=True)
class ModelSettings:
    """Generation settings of one model; ``None`` = the run's default."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None

    def merged(self, other: ModelSettings) -> ModelSettings:
        """``other``'s values where it sets them, else this one's."""
        return ModelSettings(**{k: (getattr(other, k) if getattr(other, k) is not None else getattr(self, k))
                                for k in ("temperature", "max_tokens", "top_p")})

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("temperature", self.temperature), ("max_tokens", self.max_tokens),
                                  ("top_p", self.top_p)) if v is not None}


def _value(key: str, raw: Any, where: str) -> Any:
    want = "a positive whole number of tokens" if key == "max_tokens" else "a number"
    bad = CarebenchError(f"{where}: {key} must be {want}, got {raw!r}")
    if isinstance(raw, bool) or (key == "max_tokens" and isinstance(raw, float) and not raw.is_integer()):
        raise bad
    try:
        v = int(raw) if key == "max_tokens" else float(raw)
    except (TypeError, ValueError):
        raise bad from None
    if key == "max_tokens":
        if v < 1:
            raise bad
        return v
    lo, hi = (0.0, 2.0) if key == "temperature" else (0.0, 1.0)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise CarebenchError(f"{where}: {key} must be between {lo:g} and {hi:g}, got {raw!r}")
    return v


def settings_from_mapping(values: Mapping[str, Any], where: str) -> ModelSettings:
    known = set(ModelSettings.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise CarebenchError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return ModelSettings(**{k: _value(k, v, where) for k, v in values.items()})


def parse_model_options(values: Iterable[str], flag: str = "--model-option") -> dict[str, ModelSettings]:
    """``SPEC:key=value`` strings -> settings per spec (later values win)."""
    out: dict[str, ModelSettings] = {}
    for v in values:
        spec, sep, kv = v.rpartition(":")
        key, eq, raw = kv.partition("=")
        if not sep or not spec or not eq or not key.strip():
            raise CarebenchError(f"{flag} expects SPEC:key=value (e.g. openai:gpt-4o:temperature=1), got {v!r}")
        s = settings_from_mapping({key.strip(): raw.strip()}, f"{flag} {v!r}")
        out[spec] = out.get(spec, ModelSettings()).merged(s)
    return out


def load_model_settings(path: str | Path) -> dict[str, ModelSettings]:
    """A settings file: one table (TOML) or object (JSON) of settings per model spec."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as e:
        raise CarebenchError(f"cannot read model settings {p}: {e.strerror}") from None
    try:
        if p.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            raise CarebenchError(f"{p}: model settings must be .toml or .json")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise CarebenchError(f"{p}: invalid {p.suffix[1:].upper()} ({e})") from None
    if not isinstance(data, dict):
        raise CarebenchError(f"{p}: expected a table of model specs")
    out = {}
    for spec, values in data.items():
        if not isinstance(values, dict):
            raise CarebenchError(f"{p}: [{spec}] must be a table of settings")
        out[str(spec)] = settings_from_mapping(values, f"{p} [{spec}]")
    return out


def model_settings(
    specs: Sequence[str], file: str | Path | None = None, options: Iterable[str] = (), flag: str = "--model-option"
) -> dict[str, ModelSettings]:
    """Settings per spec of this run: the file, overridden by the options; every spec named
    must be one of ``specs`` (a typo would otherwise be silently ignored)."""
    merged: dict[str, ModelSettings] = dict(load_model_settings(file)) if file else {}
    for spec, s in parse_model_options(options, flag).items():
        merged[spec] = merged.get(spec, ModelSettings()).merged(s)
    stray = [s for s in merged if s not in specs]
    if stray:
        raise CarebenchError(f"settings given for {stray[0]!r}, which is not a model of this run "
                             f"({', '.join(specs) or 'none'})")
    return merged

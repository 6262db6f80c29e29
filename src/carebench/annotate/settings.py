"""The texts and limits of an annotation server, from the packaged defaults plus an
optional YAML file: the content notice, session size, break prompt, support
resources (shown on every page) and per-mode instructions.

They are configurable because VEILED-SH's ethics section sets the welfare
conditions (informed in advance, bounded sessions, skip and withdraw without
penalty, debriefing) but not their wording, and its Appendix B.1 instructions are
not public.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from carebench.types import CarebenchError


class Support(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    url: str = ""

    @field_validator("url")
    @classmethod
    def _web_address(cls, v: str) -> str:
        if v and not v.startswith(("https://", "http://", "tel:", "mailto:")):
            raise ValueError("must be an https://, http://, tel: or mailto: address")
        return v


class Instructions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    policy: str
    review: str
    criterion: str
    rubric_walk: str


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    support: Support
    content_notice: str
    session_cases: int = Field(ge=1)
    break_text: str
    finished_text: str
    instructions: Instructions
    max_form_bytes: int = Field(ge=1024)
    max_notes_chars: int = Field(ge=0)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def load_settings(path: Path | None = None) -> Settings:
    """Defaults, overridden key by key by the YAML file at ``path``."""
    data = yaml.safe_load(resources.files("carebench.annotate").joinpath("defaults.yaml").read_text("utf-8"))
    if path is not None:
        try:
            over = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise CarebenchError(f"{path}: cannot read settings ({e.strerror})") from None
        except yaml.YAMLError as e:
            raise CarebenchError(f"{path}: invalid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(over, dict):
            raise CarebenchError(f"{path}: settings must be a mapping of keys to values")
        data = _merge(data, over)
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise CarebenchError(f"{path}: field {field!r}: {err['msg']}") from None

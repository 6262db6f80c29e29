"""The ``construct build`` configuration: one YAML file, every choice stated.

Unknown keys are errors (a typo must not silently fall back to a default). The
resolved configuration is written to the run's manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from carebench.construct.quality import GATE_LIMITS
from carebench.types import CarebenchError


class GateLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    severity: float = Field(GATE_LIMITS["severity_preserved"], ge=0, le=1)
    leakage: float = Field(GATE_LIMITS["no_leakage"], ge=0, le=1)
    format: float = Field(GATE_LIMITS["format_ok"], ge=0, le=1)

    def as_gates(self) -> dict[str, float]:
        return {"severity_preserved": self.severity, "no_leakage": self.leakage, "format_ok": self.format}


class BuildConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sources: str = "builtin:sources"
    limit: int | None = Field(None, ge=1)  # only the first N source rows (smoke runs)
    personas: str = "builtin:personas"
    persona_id_field: str = "id"
    persona_text_field: str = "text"
    lexicon: list[str] = Field(default_factory=list)
    lexicon_replace: bool = False
    classifier: str = "none"  # none | llm:SPEC | scores:PATH
    threshold: float = 0.5
    uncertain_low: float = 0.3
    keep_share: float = Field(0.25, ge=0, le=1)
    router: str | None = None  # sketch + pick model
    embedder: str = "builtin"
    k: int = Field(10, ge=1)
    attributes: Literal["inform", "filter"] = "inform"
    contexts: str | None = None  # contexts YAML (default: the packaged contracts)
    rewrite_contexts: list[str] = Field(default_factory=lambda: ["counselor_chat", "platform_search", "triage"])
    forum_share: float = Field(0.25, ge=0, le=1)
    rewriters: list[str] = Field(default_factory=list)
    judge: str | None = None
    selection_sample: int = Field(60, ge=1)  # rewrite rows every configuration is judged on
    gate_limits: GateLimits = Field(default_factory=GateLimits)
    drop_gate_failures: bool = True
    expressions: str | None = "builtin:expressions"
    anonymizer: str = "presidio"
    names: str | None = None  # known names replaced as PERSON (file, one per line)
    reversals: str | None = "builtin:reversals"
    literals: str | None = None  # strings that must not survive (file, one per line)
    on_residual: Literal["error", "drop"] = "error"
    seed: int = 42
    figures: bool = True
    topics: int = Field(6, ge=1)

    @field_validator("rewrite_contexts")
    @classmethod
    def _ctx(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one rewrite context")
        if "forum" in v:
            raise ValueError("forum rows are kept as written; it is not a rewrite context")
        return v

    def with_model(self, spec: str | None) -> BuildConfig:
        """Fill every unset model role with one spec (``--model``)."""
        if not spec:
            return self
        upd: dict[str, Any] = {}
        if self.router is None:
            upd["router"] = spec
        if self.judge is None:
            upd["judge"] = spec
        if not self.rewriters:
            upd["rewriters"] = [spec]
        return self.model_copy(update=upd)

    def check_models(self) -> None:
        missing = [n for n, v in (("router", self.router), ("judge", self.judge)) if not v]
        if not self.rewriters:
            missing.append("rewriters")
        if missing:
            raise CarebenchError(f"no model for {', '.join(missing)}: set them in the config or pass --model")


def load_build_config(path: str | Path | None) -> BuildConfig:
    if path is None:
        return BuildConfig()
    from carebench.construct.io import resolve

    p = resolve(path)
    try:
        raw = yaml.safe_load(p.read_text("utf-8")) or {}
    except yaml.YAMLError as e:  # one line: where, and the parser's problem (its message spans several)
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise CarebenchError(f"{p}{at}: invalid YAML ({getattr(e, 'problem', None) or ' '.join(str(e).split())})") from None
    if not isinstance(raw, dict):
        raise CarebenchError(f"{p}: expected a mapping of settings")
    try:
        return BuildConfig.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "config"
        raise CarebenchError(f"{p}: {where}: {err['msg']}") from None

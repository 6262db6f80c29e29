"""Per-model request options: what one model's API needs that another's refuses.

Reasoning models refuse ``max_tokens`` (they take ``max_completion_tokens``, which
also has to leave room for hidden reasoning), refuse any temperature but the default,
refuse log probabilities, and take ``reasoning_effort``; some providers need extra
body fields (e.g. safety settings, which "Beyond the Flag" §4.2 turned off for one
provider). These are properties of the *model*, so they are given per model spec::

    --model-option openai:o4-mini:reasoning=true      # max_completion_tokens, no
    --model-option openai:o4-mini:reasoning_effort=low  #   temperature, no logprobs
    --model-option openai:o4-mini:max_tokens=2000       # room for hidden reasoning
    --model-option gemini:x:extra.safety_settings='[...]'

or in a config file under ``model_options: {SPEC: {key: value}}``. They take effect
in the provider's request body and are part of every cache key of that model, so a
changed option never reuses an answer obtained under other options.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from carebench.models.base import parse_spec
from carebench.types import CarebenchError

TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
KEYS = ("token_param", "max_tokens", "temperature", "reasoning_effort", "logprobs", "output", "extra")
#: ``output=``: how an OpenAI-compatible model's structured requests are constrained,
#: fixed instead of probed (json_object is what llama-cpp-python's server accepts)
OUTPUT_MODES = ("json_schema", "json_object", "none")
#: ``reasoning=true``: what OpenAI's reasoning endpoints need, unless given explicitly
REASONING_PRESET = {"token_param": "max_completion_tokens", "temperature": "omit", "logprobs": False}
OMIT = "omit"


@dataclass(frozen=True)
class RequestOptions:
    """Overrides one model applies to every request it sends (None = keep the request's)."""

    token_param: str | None = None  # "max_tokens" | "max_completion_tokens"
    max_tokens: int | None = None  # output cap replacing the request's (reasoning needs room)
    temperature: float | str | None = None  # a number, or "omit" to send none
    reasoning_effort: str | None = None  # e.g. "minimal", "low", "medium", "high"
    logprobs: bool | None = None  # False: never ask for log probabilities
    #: structured-output mode of an OpenAI-compatible model (OUTPUT_MODES); None: probed
    output: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # provider body fields, sent as given

    def to_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults (for cache keys and manifests)."""
        out = {k: getattr(self, k) for k in KEYS[:-1] if getattr(self, k) is not None}
        if self.extra:
            out["extra"] = self.extra
        return out

    def __bool__(self) -> bool:
        return bool(self.to_dict())

    def output_cap(self, requested: int | None) -> int | None:
        return self.max_tokens if self.max_tokens is not None else requested

    def apply_openai(self, body: dict[str, Any], requested_max: int | None) -> dict[str, Any]:
        """An OpenAI-compatible chat body with these options applied."""
        body = dict(body)
        cap = self.output_cap(requested_max)
        body.pop("max_tokens", None)
        if cap is not None:
            body[self.token_param or "max_tokens"] = cap
        if self.temperature == OMIT:
            body.pop("temperature", None)
        elif self.temperature is not None:
            body["temperature"] = float(self.temperature)
        if self.logprobs is False:
            body.pop("logprobs", None)
            body.pop("top_logprobs", None)
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        body.update(self.extra)
        return body

    def apply_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        """An Anthropic Messages body with these options applied (it always needs max_tokens)."""
        body = dict(body)
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature == OMIT:
            body.pop("temperature", None)
        elif self.temperature is not None:
            body["temperature"] = float(self.temperature)
        body.update(self.extra)
        return body


def _value(key: str, value: Any, where: str) -> Any:
    if key == "token_param":
        if value not in TOKEN_PARAMS:
            raise CarebenchError(f"{where}: token_param must be one of {', '.join(TOKEN_PARAMS)}")
        return value
    if key == "max_tokens":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CarebenchError(f"{where}: max_tokens must be a positive integer")
        return value
    if key == "temperature":
        if value == OMIT:
            return OMIT
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CarebenchError(f"{where}: temperature must be a number or 'omit'")
        return float(value)
    if key == "reasoning_effort":
        return str(value)
    if key == "logprobs":
        if not isinstance(value, bool):
            raise CarebenchError(f"{where}: logprobs must be true or false")
        return value
    if key == "output":
        if value not in OUTPUT_MODES:
            raise CarebenchError(f"{where}: output must be one of {', '.join(OUTPUT_MODES)}")
        return value
    if key == "extra":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise CarebenchError(f"{where}: extra must be a JSON object") from None
        if not isinstance(value, Mapping):
            raise CarebenchError(f"{where}: extra must be a mapping of body fields")
        return dict(value)
    raise CarebenchError(f"{where}: unknown model option {key!r}; known: {', '.join(KEYS)} "
                         "(or extra.FIELD=value)")


def request_options(mapping: Mapping[str, Any], where: str) -> RequestOptions:
    """Validated options from ``{key: value}`` (``extra.FIELD`` keys fill ``extra``)."""
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    mapping = dict(mapping)
    preset = mapping.pop("reasoning", False)
    if not isinstance(preset, bool):
        raise CarebenchError(f"{where}: reasoning must be true or false")
    if preset:
        mapping = {**REASONING_PRESET, **mapping}
    for key, value in mapping.items():
        key = str(key)
        if key.startswith("extra."):
            extra[key[len("extra."):]] = value
            continue
        fields[key] = _value(key, value, where)
    if extra:
        fields["extra"] = {**fields.get("extra", {}), **extra}
    return RequestOptions(**fields)


def parse_model_option(text: str) -> tuple[str, str, Any]:
    """``SPEC:key=value`` -> (spec, key, value); the value is read as a YAML scalar."""
    import yaml

    head, eq, raw = text.partition("=")
    spec, colon, key = head.rpartition(":")
    if not eq or not colon or not spec or not key.strip():
        raise CarebenchError(
            f"--model-option {text!r}: use SPEC:key=value (e.g. openai:o4-mini:reasoning_effort=low)")
    try:
        value = yaml.safe_load(raw.strip()) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw.strip()
    return spec.strip(), key.strip(), value


def collect_model_options(cli: list[str] | None, config: Mapping[str, Any] | None,
                          where: str = "model_options") -> dict[str, RequestOptions]:
    """Options per model spec from a config mapping, then ``--model-option`` flags on top,
    keyed by the spec's canonical text (what ``Run.model`` looks them up by)."""
    raw: dict[str, dict[str, Any]] = {}
    if config is not None:
        if not isinstance(config, Mapping):
            raise CarebenchError(f"{where}: must map model specs to option mappings")
        for spec, opts in config.items():
            if not isinstance(opts, Mapping):
                raise CarebenchError(f"{where}: options of {spec!r} must be a mapping")
            raw.setdefault(_canonical(str(spec)), {}).update(opts)
    for text in cli or []:
        spec, key, value = parse_model_option(text)
        raw.setdefault(_canonical(spec), {})[key] = value
    return {spec: request_options(opts, f"{where} for {spec}") for spec, opts in raw.items()}


def _canonical(spec: str) -> str:
    """A spec's one text (``Run.model`` looks options up by it): a spec typed with a trailing
    slash or spaces names the same model; a key that is no spec is kept as given."""
    try:
        return str(parse_spec(spec))
    except CarebenchError:
        return spec

"""The config-file form of ``carebench risk run`` (YAML or TOML), for many methods and models.

Example (YAML)::

    data: data/500_Reddit_users_posts_labels.csv
    format: gaur
    models: [openai:gpt-4o-mini, anthropic:claude-haiku-4-5]   # model-backed methods run on each
    moderation_model: openai-moderation:omni-moderation-latest
    seed: 42
    bootstrap: 2000
    methods:
      - tfidf-lr
      - embed-lr
      - method: llm
        options: {variant: conservative}
        label: llm-conservative
      - method: llm-cot
        model: anthropic:claude-haiku-4-5    # only this model

Command-line options given explicitly override the file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from carebench.datasets.files import read_text
from carebench.models.base import ModelSpec, SpecLike, parse_spec
from carebench.risk.config import MethodSpec, RunConfig
from carebench.risk.methods import REGISTRY
from carebench.risk.scoring import DEFAULT_MAX_FAILURE_SHARE
from carebench.types import CarebenchError

TOP_KEYS = {
    "data", "format", "model", "models", "moderation_model", "seed", "bootstrap", "out",
    "train", "train_format", "failures", "max_failure_share", "columns", "train_columns",
    "prompts", "model_options", "use_cache", "cache", "budget_usd", "budget", "concurrency",
    "n_folds", "methods", "priors", "alert_budgets", "positive", "net_benefit_pt",
}
METHOD_KEYS = {"method", "label", "model", "models", "moderation_model", "options"}


def read_config(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CarebenchError(f"config file not found: {path}")
    text = read_text(path)
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise CarebenchError(f"{path}: config must be .yaml, .yml or .toml")
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise CarebenchError(f"{path}: invalid config ({e})") from None
    except Exception as e:  # yaml.YAMLError without importing yaml at module level
        if type(e).__module__.startswith("yaml"):
            raise CarebenchError(f"{path}: invalid YAML ({e})") from None
        raise
    if not isinstance(data, dict):
        raise CarebenchError(f"{path}: the config must be a mapping of settings")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise CarebenchError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(sorted(TOP_KEYS))}")
    return data


def _needs_model(method: str) -> bool:
    factory = REGISTRY.get(method)
    if factory is None:
        raise CarebenchError(f"unknown risk method {method!r}; known: {', '.join(sorted(REGISTRY))}")
    return bool(getattr(factory, "needs_model", False) or getattr(factory(), "needs_model", False))


def _takes_panel(method: str) -> bool:
    """Ensembles whose voters are the run's models (vote, adjudicated, stacked)."""
    return bool(getattr(REGISTRY.get(method), "uses", {}).get("votes"))


def parse_method_arg(text: str) -> dict[str, Any]:
    """``NAME`` or ``NAME:key=value,key=value`` (values read as YAML scalars/lists), e.g.
    ``embed-lr:encoder=/models/mentalbert`` or ``llm:variant=conservative``."""
    name, _, rest = text.partition(":")
    entry: dict[str, Any] = {"method": name.strip()}
    if rest.strip():
        import yaml

        opts: dict[str, Any] = {}
        for part in rest.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise CarebenchError(f"--method {text!r}: options must be key=value pairs")
            try:
                opts[key.strip()] = yaml.safe_load(value.strip())
            except yaml.YAMLError:
                opts[key.strip()] = value.strip()
        entry["options"] = opts
    return entry


def method_specs(entries: list[Any], models: list[SpecLike] | None, where: str) -> list[MethodSpec]:
    """Expand method entries; a model-backed method without its own model runs on each of
    ``models`` (labelled ``method@model`` when there are several)."""
    if not isinstance(entries, list) or not entries:
        raise CarebenchError(f"{where}: 'methods' must be a non-empty list")
    out: list[MethodSpec] = []
    for i, e in enumerate(entries, 1):
        if isinstance(e, str):
            e = parse_method_arg(e)
        if not isinstance(e, dict) or "method" not in e:
            raise CarebenchError(f"{where}: methods[{i}] needs a 'method' name")
        unknown = set(e) - METHOD_KEYS
        if unknown:
            raise CarebenchError(f"{where}: methods[{i}]: unknown key(s) {', '.join(sorted(unknown))}")
        opts = e.get("options") or {}
        if not isinstance(opts, dict):
            raise CarebenchError(f"{where}: methods[{i}]: 'options' must be a mapping")
        own = e.get("models") or ([e["model"]] if e.get("model") else None)
        pool = own or models
        if pool and len(pool) > 1 and _takes_panel(e["method"]):
            # a vote's panel is the models themselves (§4.3), not one run per model
            out.append(MethodSpec(e["method"], e.get("label"), pool[0], e.get("moderation_model"),
                                  dict(opts), list(pool)))
            continue
        targets = own or (models if models and _needs_model(e["method"]) else [None])
        for m in targets:
            label = e.get("label")
            if label and len(targets) > 1:
                label = f"{label}@{m}"
            out.append(MethodSpec(e["method"], label, m, e.get("moderation_model"), dict(opts)))
    return out


def _spec(value: SpecLike, where: str) -> ModelSpec:
    """A model spec of the file (or the command line's, already parsed), parsed once here."""
    if isinstance(value, ModelSpec):
        return value
    try:
        return parse_spec(value)
    except CarebenchError as e:
        raise CarebenchError(f"{where}: {e}") from None


def _entry_specs(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """A method entry with its own models (``model``, ``models``, ``moderation_model``) parsed."""
    out = dict(entry)
    for key in ("model", "moderation_model"):
        if out.get(key):
            out[key] = _spec(out[key], where)
    if out.get("models"):
        models = out["models"]
        out["models"] = [_spec(m, where) for m in (models if isinstance(models, list) else [models])]
    return out


def file_budget(data: dict[str, Any], where: str) -> float | None:
    """``budget_usd`` (the shared name), or ``budget`` (the name risk configs used first)."""
    new, old = data.get("budget_usd"), data.get("budget")
    if new is not None and old is not None and new != old:
        raise CarebenchError(f"{where}: 'budget' and 'budget_usd' disagree ({old} vs {new}); give one")
    value = new if new is not None else old
    if value is not None and not isinstance(value, int | float):
        raise CarebenchError(f"{where}: 'budget_usd' must be a number of USD, got {value!r}")
    return value


def config_from_file(path: str | Path, overrides: dict[str, Any], run: dict[str, Any] | None = None) -> RunConfig:
    """A RunConfig from a file, with explicitly given CLI values (not None) taking precedence.

    ``run`` holds the shared run flags given on the command line (the keyword arguments of
    :func:`carebench.engine.options.run_options`); a flag left at None takes the file's value."""
    data = read_config(path)
    where = str(path)
    for k, v in overrides.items():
        if v is not None and k not in ("methods", "model_option"):
            if k == "models":  # the command line's --model list replaces the file's model(s)
                data.pop("model", None)
            data[k] = v
    models = data.pop("models", None)
    if isinstance(models, str):
        models = [models]
    if data.get("model") and not models:
        models = [data["model"]]
    models = [_spec(m, where) for m in models] if models else None
    model = _spec(data["model"], where) if data.get("model") else None
    entries = overrides.get("methods") or data.get("methods")
    if not entries:
        raise CarebenchError(f"{path}: no methods (add 'methods:' or pass --method)")
    if "data" not in data:
        raise CarebenchError(f"{path}: missing 'data' (or pass --data)")
    if isinstance(entries, list):
        entries = [_entry_specs(e, where) if isinstance(e, dict) else e for e in entries]
    specs = method_specs(entries, models, where)
    moderation = data.get("moderation_model")
    return RunConfig(
        data=str(data["data"]), methods=specs, format=data.get("format"),
        model=model or (models[0] if models and len(models) == 1 else None),
        moderation_model=_spec(moderation, where) if moderation else None, seed=int(data.get("seed", 42)),
        bootstrap=int(data.get("bootstrap", 2000)),
        train=data.get("train"), train_format=data.get("train_format"),
        failures=str(data.get("failures", "wrong")),
        max_failure_share=float(data.get("max_failure_share", DEFAULT_MAX_FAILURE_SHARE)),
        columns=data.get("columns"), train_columns=data.get("train_columns"),
        prompts=None if data.get("prompts") is None else str(data["prompts"]),
        n_folds=int(data.get("n_folds", 5)), options=_file_run_options(data, run or {}, str(path)),
        limit=None if data.get("limit") is None else int(data["limit"]),
        priors=None if data.get("priors") is None else [float(x) for x in _as_list(data["priors"])],
        alert_budgets=None if data.get("alert_budgets") is None
        else [float(x) for x in _as_list(data["alert_budgets"])],
        positive=str(data.get("positive", "behavior")),
        net_benefit_pt=None if data.get("net_benefit_pt") is None else float(data["net_benefit_pt"]),
    )


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _file_run_options(data: dict[str, Any], flags: dict[str, Any], where: str) -> Any:
    """The file's run settings under the command line's (a flag given wins)."""
    from carebench.engine.options import run_options

    given = {k: v for k, v in flags.items() if v is not None}
    budget = given.pop("budget", None)
    return run_options(**{
        "out": data.get("out"), "cache": data.get("cache"),
        "concurrency": data.get("concurrency"), **given,
        "no_cache": bool(given.get("no_cache")) or not bool(data.get("use_cache", True)),
        "budget": budget if budget is not None else file_budget(data, where),
        "model_options": data.get("model_options"),
    })

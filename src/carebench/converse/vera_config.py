"""VERA-MH's replayable run configs (its ``vera`` CLI's JSON) read as a converse run.

``carebench converse run --vera-config FILE`` runs what a VERA-MH 2.0 config describes: the
same target (personas, persona prompt, rubric and judge prompts), chatbot, user models,
judges, turns, speaker order, sessions and word cap. Both forms VERA-MH writes are read:
the input form (``target``, ``generation``, ``judging``, ``scoring``) and the resolved form
its ``--print`` emits (``invocation``, ``generation.personas`` and
``generation.persona_context_template``, ``judging.rubrics`` with the three rubric files).

What maps to what:

- ``target`` (a name, or a manifest path): the target folder ``data/<target>`` of the
  VERA-MH checkout, which is ``--rubric vera:PATH`` when given, else the first folder at or
  above the config file that holds ``data/<target>`` (VERA-MH resolves a config's paths
  against its repository root; checked-in configs live in ``configs/``);
- model names: ``claude-*`` is ``anthropic:NAME``, ``gpt-*`` and the o-series
  ``openai:NAME``; a name that already is a carebench spec (``openai:m@http://...``) is
  taken as it is; any other name is an error (carebench has no client for it);
- a model's ``repeats``: the user models' are carebench's ``--repeats`` (the same for every
  user model); a judge's are that many instances of the judge; the chatbot's must be 1;
- a model's ``temperature``, ``reasoning_effort`` and ``max_tokens``: carebench model
  options of that spec (``--model-option``);
- ``turns``: ``--turns`` in messages (VERA-MH's ``-t``); ``persona_speaks_first: false``:
  ``--provider-speaks-first``; ``sessions``; ``max_total_words``;
- ``invocation.sample``: the first N personas of the file.

Every other setting it cannot honour is one line in :attr:`VeraRun.not_honoured` (printed,
and kept in the run's manifest). A config field VERA-MH itself does not define is an
error, as VERA-MH refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.converse.vera_bundle import VeraBundle, bundle_from_manifest, load_vera_bundle
from carebench.datasets.files import read_text
from carebench.engine.rundir import file_sha256
from carebench.models.base import ModelSpec, parse_spec
from carebench.types import CarebenchError

#: the fields of each section, as VERA-MH's config types declare them (an unknown one is refused)
TOP = ("target", "generation", "judging", "scoring", "invocation")
GENERATION = ("chatbot", "user", "personas", "persona_context_template", "turns", "output", "max_concurrent",
              "max_total_words", "persona_speaks_first", "sessions")
#: a config states every behaviour field explicitly (VERA-MH: "a config must state every behavior field")
GENERATION_REQUIRED = ("chatbot", "user", "turns", "output", "max_concurrent", "max_total_words",
                       "persona_speaks_first", "sessions")
JUDGING = ("models", "conversations", "rubrics", "output", "max_concurrent", "per_judge",
           "personas", "persona_annotation_columns")
SCORING = ("personas", "skip_risk_analysis")
INVOCATION = ("debug", "sample", "into")
#: a model entry's parameters carebench applies as model options of that spec
OPTION_KEYS = ("temperature", "reasoning_effort", "max_tokens")


@dataclass
class VeraRun:
    """The converse settings a VERA-MH run config comes to, and what could not be honoured."""

    rubric: str
    bundle: VeraBundle
    chatbots: list[ModelSpec]
    simulators: list[ModelSpec]
    judges: list[ModelSpec]
    repeats: int
    turns: int
    provider_speaks_first: bool
    sessions: list[str]
    max_total_words: int | None
    sample: int | None
    #: spec text -> {option: value}
    model_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_honoured: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: ``--rubric vera:PATH`` given beside the config (re-read by the suite)
    checkout: str | None = None

    def persona_ids(self) -> list[str] | None:
        """``invocation.sample``: the first N personas of the target's file (None: all)."""
        if self.sample is None or self.bundle.personas is None:
            return None
        from carebench.converse.personas import load_personas

        return [p.id for p in load_personas(self.bundle.personas)[:self.sample]]


def model_spec(name: Any, where: str) -> ModelSpec:
    """A VERA-MH model name as a carebench spec (see the module docstring)."""
    if not isinstance(name, str) or not name.strip():
        raise CarebenchError(f"{where}: a model needs a 'name'")
    name = name.strip()
    if ":" in name:
        try:
            return parse_spec(name)
        except CarebenchError:
            pass
    low = name.lower()
    if low.startswith("claude"):
        return parse_spec(f"anthropic:{name}")
    if low.startswith(("gpt", "chatgpt", "o1", "o3", "o4")):
        return parse_spec(f"openai:{name}")
    raise CarebenchError(f"{where}: model {name!r} has no carebench client (claude-* runs as anthropic:NAME, gpt-* "
                         "and o-series as openai:NAME); write a carebench spec as its name, e.g. "
                         f"openai:{name}@http://host:port/v1")


def _section(cfg: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    sec = cfg.get(key)
    if sec is None:
        return {}
    if not isinstance(sec, Mapping):
        raise CarebenchError(f"{where}: '{key}' must be an object")
    unknown = sorted(set(sec) - set(allowed))
    if unknown:
        raise CarebenchError(f"{where}: {key}.{unknown[0]}: not a field of VERA-MH's run config "
                             f"(known: {', '.join(allowed)})")
    return dict(sec)


def _models(entries: Any, where: str, what: str, notes: list[str],
            options: dict[str, dict[str, Any]]) -> list[tuple[ModelSpec, int]]:
    """(spec, repeats) of a list of VERA-MH model entries; their parameters become model
    options, or a line of ``notes``."""
    if isinstance(entries, Mapping):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise CarebenchError(f"{where}: {what} must name at least one model")
    out = []
    for i, e in enumerate(entries):
        here = f"{what}[{i}]" if len(entries) > 1 or what.endswith(("user", "models")) else what
        if not isinstance(e, Mapping):
            raise CarebenchError(f"{where}: {here} must be an object with 'name' and 'repeats'")
        spec = model_spec(e.get("name"), f"{where}: {here}")
        repeats = e.get("repeats", 1)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise CarebenchError(f"{where}: {here}.repeats must be an integer of at least 1, got {repeats!r}")
        for k, v in e.items():
            if k in ("name", "repeats"):
                continue
            if k in OPTION_KEYS:
                options.setdefault(str(spec), {})[k] = v
            else:
                notes.append(f"{here}.{k}={v!r}: not a parameter carebench can pass to {spec} "
                             f"(it passes {', '.join(OPTION_KEYS)})")
        out.append((spec, repeats))
    return out


def _checkout(config: Path, target: str, given: Path | None) -> Path:
    """The VERA-MH checkout a config's paths resolve against (see the module docstring)."""
    if given is not None:
        return given
    for folder in (config.parent, *config.parent.parents):
        if (folder / "data" / target).is_dir() or (folder / target).is_file():
            return folder
    raise CarebenchError(f"{config}: target {target!r}: no data/{target} at or above the config's folder; "
                         "give the VERA-MH checkout as --rubric vera:PATH")


def _int_or_none(v: Any, where: str, name: str, least: int) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise CarebenchError(f"{where}: {name} must be null or an integer of at least {least}, got {v!r}")
    return v


def read_vera_config(path: str | Path, checkout: str | None = None) -> VeraRun:
    """A VERA-MH run config as converse settings. ``checkout``: ``--rubric vera:PATH``, the
    VERA-MH checkout its paths resolve against."""
    path = Path(path)
    if not path.is_file():
        raise CarebenchError(f"{path}: VERA-MH run config not found")
    where = str(path)
    try:
        cfg = json.loads(read_text(path))
    except ValueError as e:
        raise CarebenchError(f"{where}:1:1: invalid JSON ({e})") from None
    if not isinstance(cfg, Mapping):
        raise CarebenchError(f"{where}:1:1: a VERA-MH run config is a JSON object")
    unknown = sorted(set(cfg) - set(TOP))
    if unknown:
        raise CarebenchError(f"{where}: {unknown[0]}: not a field of VERA-MH's run config (known: {', '.join(TOP)})")
    gen = _section(cfg, "generation", GENERATION, where)
    if not gen:
        raise CarebenchError(f"{where}: no 'generation' section: converse run plays conversations (a judging-only "
                             "config is 'converse judge --transcripts' with --rubric vera:PATH)")
    missing = [k for k in GENERATION_REQUIRED if k not in gen]
    if missing:
        raise CarebenchError(f"{where}: generation.{missing[0]} is missing (a VERA-MH config states every "
                             "behaviour field, null where there is no limit)")
    judging = _section(cfg, "judging", JUDGING, where)
    scoring = _section(cfg, "scoring", SCORING, where)
    invocation = _section(cfg, "invocation", INVOCATION, where)
    notes: list[str] = []
    options: dict[str, dict[str, Any]] = {}
    root = Path(checkout.removeprefix("vera:")) if checkout else None

    # the target: its files, from a target name, a manifest path, or the resolved files
    target = cfg.get("target")
    if target is not None and ("personas" in gen or "rubrics" in judging):
        raise CarebenchError(f"{where}: give 'target' or the resolved files (generation.personas, "
                             "judging.rubrics), not both")
    if target is not None:
        if not isinstance(target, str) or not target.strip() or target == "all":
            raise CarebenchError(f"{where}: target must name one target (SI, HFO or a manifest path), "
                                 f"got {target!r}")
        base = _checkout(path, target, root)
        folder = base / target if target.endswith(".json") else base / "data" / target
        folder = folder.parent if folder.suffix == ".json" else folder
        rubric = f"vera:{folder}"
        bundle = load_vera_bundle(rubric)
    else:
        personas, context = gen.get("personas"), gen.get("persona_context_template")
        rubrics = judging.get("rubrics")
        if not (isinstance(personas, list) and personas and context and isinstance(rubrics, list) and rubrics):
            raise CarebenchError(f"{where}: no 'target': the config must name generation.personas, "
                                 "generation.persona_context_template and judging.rubrics")
        if len(rubrics) != 1 or not isinstance(rubrics[0], Mapping):
            raise CarebenchError(f"{where}: judging.rubrics must hold exactly one rubric (as VERA-MH requires)")
        base = root or next((f for f in (path.parent, *path.parent.parents) if (f / "data").is_dir()), path.parent)
        man = {**{k: rubrics[0].get(k) for k in ("rubric_file", "rubric_prompt_beginning_file",
                                                   "question_prompt_file")},
               "personas": personas, "persona_context_template_file": context,
               "persona_annotation_columns": judging.get("persona_annotation_columns") or []}
        if not man["rubric_file"]:
            raise CarebenchError(f"{where}: judging.rubrics[0] names no rubric_file")
        rubric_path = Path(str(man["rubric_file"]))
        bundle = bundle_from_manifest(base, man, path, target=(base / rubric_path).parent.name)
        rubric = f"vera:{(base / rubric_path).parent}"
        if len(personas) > 1:
            notes.append(f"generation.personas: {len(personas)} files; carebench plays the first, "
                         f"{personas[0]}")

    # the models
    (bot, bot_rep), *more = _models(gen["chatbot"], where, "generation.chatbot", notes, options)
    if more:
        raise CarebenchError(f"{where}: generation.chatbot names one model")
    if bot_rep != 1:
        raise CarebenchError(f"{where}: generation.chatbot.repeats must be 1 (as VERA-MH requires)")
    users = _models(gen["user"], where, "generation.user", notes, options)
    reps = sorted({r for _, r in users})
    if len(reps) > 1:
        notes.append(f"generation.user repeats differ ({', '.join(str(r) for _, r in users)}): carebench "
                     f"plays every user model the same number of repeats, {reps[-1]}")
    judges: list[ModelSpec] = []
    for spec, n in _models(judging["models"], where, "judging.models", notes, options) if "models" in judging \
            else []:
        judges.extend([spec] * n)

    turns = gen["turns"]
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise CarebenchError(f"{where}: generation.turns must be an integer of at least 1, got {turns!r}")
    speaks = gen["persona_speaks_first"]
    if not isinstance(speaks, bool):
        raise CarebenchError(f"{where}: generation.persona_speaks_first must be true or false")
    sessions = gen["sessions"]
    if sessions is not None and (not isinstance(sessions, list) or not sessions
                                 or not all(isinstance(x, str) and x for x in sessions)):
        raise CarebenchError(f"{where}: generation.sessions must be null or a list of session names")
    words = _int_or_none(gen["max_total_words"], where, "generation.max_total_words", 1)
    _int_or_none(gen["max_concurrent"], where, "generation.max_concurrent", 0)
    sample = _int_or_none(invocation.get("sample"), where, "invocation.sample", 1)

    # what carebench does its own way
    notes.append(f"generation.output={gen['output']!r}: carebench writes the run to --out")
    if gen["max_concurrent"] is not None:
        notes.append(f"generation.max_concurrent={gen['max_concurrent']}: carebench limits concurrent calls per "
                     "model (--concurrency), not conversations")
    for k in ("max_concurrent", "per_judge", "output", "conversations"):
        if judging.get(k) not in (None, False):
            notes.append(f"judging.{k}={judging[k]!r}: not used by converse run (it judges the conversations "
                         "it plays; concurrency is --concurrency per model)")
    if scoring.get("skip_risk_analysis"):
        notes.append("scoring.skip_risk_analysis=true: carebench always reports the risk-level breakdown")
    if scoring.get("personas") and bundle.personas is not None and \
            (root or path.parent).joinpath(str(scoring["personas"])).resolve() != bundle.personas.resolve():
        notes.append(f"scoring.personas={scoring['personas']!r}: carebench joins risk levels from the "
                     "personas it plays")
    for k in ("debug", "into"):
        if invocation.get(k):
            notes.append(f"invocation.{k}={invocation[k]!r}: carebench resumes from its cache instead"
                         if k == "into" else f"invocation.{k}: carebench has no debug logging switch")
    return VeraRun(rubric=rubric, bundle=bundle, chatbots=[bot], simulators=[s for s, _ in users], judges=judges,
                   repeats=reps[-1], turns=turns, provider_speaks_first=not speaks, sessions=list(sessions or []),
                   max_total_words=words, sample=sample, model_options=options, not_honoured=notes,
                   provenance={"path": str(path), "sha256": file_sha256(path), "not_honoured": notes})

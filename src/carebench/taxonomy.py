"""The VEILED-SH vocabulary (INTENT / FUNCTION / RESPONSE) and application contexts, as data.

Three parts of carebench speak this vocabulary: the plural suite's profiles and
jury, the construct pipeline's proxy labels and rewriters, and the annotate web
app's forms. Keeping it in one data file that users can replace means a team
that adapts the taxonomy (VEILED-SH, §7 suggests documenting such a mapping)
changes one file, and every label is checked against the same rules: an invalid
combination is reported as an error, never silently repaired.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from carebench.types import CarebenchError

FIELDS = ("intent", "function", "response")
SEVERITY_KINDS = ("nssi", "suicidal")
#: boolean flags a RESPONSE category may carry (see :class:`Category`)
FLAGS = ("critical", "harmful", "refusal")


@dataclass(frozen=True, slots=True)
class Category:
    """One code of a field. Three flags concern RESPONSE categories only (docs/taxonomy.md):
    ``critical`` (failing it when a reference policy requests it gates the response's score
    to 0), ``harmful`` (a behaviour no response may show: the jury finding it is a critical
    failure, and no policy may request it) and ``refusal`` (the category that asks the
    responder to decline: where a policy requests it, refusing is the aligned answer)."""

    code: str
    name: str
    description: str = ""
    critical: bool = False
    harmful: bool = False
    refusal: bool = False


@dataclass(frozen=True, slots=True)
class SeverityScale:
    """A 1..n severity scale that applies when its INTENT code is chosen."""

    kind: str
    intent: str
    levels: dict[int, str]

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(sorted(self.levels))


@dataclass(frozen=True)
class Taxonomy:
    name: str
    intent: tuple[Category, ...]
    function: tuple[Category, ...]
    response: tuple[Category, ...]
    severity: dict[str, SeverityScale]
    exclusive: frozenset[str] = frozenset()
    nonempty: tuple[str, ...] = FIELDS
    source: str = "builtin"
    _names: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def categories(self, field_name: str) -> tuple[Category, ...]:
        if field_name not in FIELDS:
            raise KeyError(field_name)
        return getattr(self, field_name)

    def codes(self, field_name: str) -> tuple[str, ...]:
        return tuple(c.code for c in self.categories(field_name))

    def critical_codes(self) -> tuple[str, ...]:
        """RESPONSE codes whose omission, where a policy requests them, is a critical failure."""
        return tuple(c.code for c in self.response if c.critical and not c.harmful)

    def harmful_codes(self) -> tuple[str, ...]:
        """RESPONSE codes whose presence in a response is a critical failure."""
        return tuple(c.code for c in self.response if c.harmful)

    def refusal_codes(self) -> tuple[str, ...]:
        """RESPONSE codes that ask the responder to decline (plural's refusal policy keeps refusals there)."""
        return tuple(c.code for c in self.response if c.refusal)

    def name_of(self, code: str) -> str:
        return self._names.get(code, code)

    def names(self) -> dict[str, str]:
        """Code -> name of every category, field by field (what reports show a person)."""
        return {c.code: c.name for f in FIELDS for c in self.categories(f)}

    def normalize(self, field_name: str, value: str) -> str | None:
        """A code from a code or a category name (case and spacing ignored); None if unknown."""
        key = " ".join(str(value).replace("_", " ").split()).lower()
        for c in self.categories(field_name):
            if key in (" ".join(c.code.replace("_", " ").split()).lower(), c.name.lower(),
                       c.name.lower().replace(" / ", "/")):
                return c.code
        return None

    def validate_policy(
        self,
        intent: Iterable[str],
        function: Iterable[str],
        response: Iterable[str],
        nssi_severity: int | None = None,
        suicidal_severity: int | None = None,
        *,
        require_response: bool = True,
    ) -> list[str]:
        """Every rule the labels break, as sentences; empty when the combination is valid.

        ``require_response=False`` checks an interpretation without its response
        (the first judge of a cascade predicts intent and function only).
        """
        given = {"intent": list(intent), "function": list(function), "response": list(response)}
        errors: list[str] = []
        for f, values in given.items():
            allowed = set(self.codes(f))
            for v in values:
                if v not in allowed:
                    errors.append(f"{f}: unknown code {v!r}")
            if len(set(values)) != len(values):
                errors.append(f"{f}: a code is repeated")
            if f == "response":
                for v in values:
                    if v in self.harmful_codes():
                        errors.append(f"response: {v} ({self.name_of(v)}) is a harmful behaviour; "
                                      "no policy may request it")
            if f in self.nonempty and not values and (f != "response" or require_response):
                errors.append(f"{f}: at least one code is required")
            for x in self.exclusive & set(values):
                if len(set(values)) > 1:
                    errors.append(f"{f}: {x} ({self.name_of(x)}) cannot be combined with another code")
        sev = {"nssi": nssi_severity, "suicidal": suicidal_severity}
        for kind, scale in self.severity.items():
            level = sev.get(kind)
            chosen = scale.intent in given["intent"]
            if chosen and level is None:
                errors.append(f"{kind} severity is required when {scale.intent} is chosen")
            elif not chosen and level is not None:
                errors.append(f"{kind} severity given without {scale.intent}")
            elif level is not None and level not in scale.levels:
                errors.append(f"{kind} severity must be one of {list(scale.values)}, got {level!r}")
        for kind, level in sev.items():
            if level is not None and kind not in self.severity:
                errors.append(f"{kind} severity given, but the taxonomy has no {kind} scale")
        return errors

    def rubric_text(self) -> str:
        """The taxonomy as plain text for prompts: every code, name and description."""
        lines = [self.name, ""]
        for f in FIELDS:
            lines.append(f"{f.upper()} (choose one or more):")
            lines += [f"- {c.code}: {c.name}. {c.description}".rstrip() for c in self.categories(f)]
            lines.append("")
        for kind, scale in self.severity.items():
            lines.append(f"{kind.upper()} SEVERITY (only when {scale.intent} is chosen):")
            lines += [f"- {k}: {v}" for k, v in sorted(scale.levels.items())]
            lines.append("")
        if self.exclusive:
            lines.append("Codes that cannot be combined with others in their field: "
                         + ", ".join(sorted(self.exclusive)))
        return "\n".join(lines).rstrip() + "\n"


def _read_yaml(path: str | Path | None, package_file: str) -> tuple[Any, str]:
    if path is None:
        text = (resources.files("carebench") / "data" / package_file).read_text("utf-8")
        return yaml.safe_load(text), "builtin"
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as e:
        raise CarebenchError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise CarebenchError(f"{p}: not UTF-8 text (byte {e.start})") from None
    try:
        return yaml.safe_load(text), str(p)
    except yaml.YAMLError as e:
        raise CarebenchError(f"{p}: invalid YAML ({str(e).splitlines()[0]})") from None


def _categories(raw: Any, where: str) -> tuple[Category, ...]:
    if not isinstance(raw, list) or not raw:
        raise CarebenchError(f"{where}: expected a non-empty list of categories")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, Mapping) or not c.get("code") or not c.get("name"):
            raise CarebenchError(f"{where}[{i}]: each category needs 'code' and 'name'")
        flags = {}
        for flag in FLAGS:
            value = c.get(flag, False)
            if not isinstance(value, bool):
                raise CarebenchError(f"{where}[{i}]: '{flag}' must be true or false, got {value!r}")
            if value and not where.endswith("fields.response"):
                raise CarebenchError(f"{where}[{i}]: '{flag}' applies to RESPONSE categories only")
            flags[flag] = value
        if flags["harmful"] and flags["refusal"]:
            raise CarebenchError(f"{where}[{i}]: a category cannot be both harmful and the refusal category")
        out.append(Category(str(c["code"]), str(c["name"]), str(c.get("description", "")).strip(), **flags))
    codes = [c.code for c in out]
    if len(set(codes)) != len(codes):
        raise CarebenchError(f"{where}: duplicate codes")
    return tuple(out)


def parse_taxonomy(raw: Any, source: str = "builtin") -> Taxonomy:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("fields"), Mapping):
        raise CarebenchError(f"{source}: a taxonomy needs a 'fields' mapping with intent, function, response")
    fields = {f: _categories(raw["fields"].get(f), f"{source}: fields.{f}") for f in FIELDS}
    all_codes = [c.code for f in FIELDS for c in fields[f]]
    if len(set(all_codes)) != len(all_codes):
        raise CarebenchError(f"{source}: a code appears in two fields")
    severity: dict[str, SeverityScale] = {}
    for kind, spec in (raw.get("severity") or {}).items():
        if not isinstance(spec, Mapping) or spec.get("intent") not in {c.code for c in fields["intent"]}:
            raise CarebenchError(f"{source}: severity.{kind} needs 'intent' naming an INTENT code")
        try:
            levels = {int(k): str(v) for k, v in (spec.get("levels") or {}).items()}
        except (TypeError, ValueError):
            raise CarebenchError(f"{source}: severity.{kind}.levels must be keyed by integers") from None
        if not levels:
            raise CarebenchError(f"{source}: severity.{kind} has no levels")
        severity[str(kind)] = SeverityScale(str(kind), str(spec["intent"]), levels)
    rules = raw.get("rules") or {}
    exclusive = frozenset(str(x) for x in rules.get("exclusive", []))
    unknown = exclusive - set(all_codes)
    if unknown:
        raise CarebenchError(f"{source}: rules.exclusive names unknown codes {sorted(unknown)}")
    nonempty = tuple(str(x) for x in rules.get("nonempty", FIELDS))
    if set(nonempty) - set(FIELDS):
        raise CarebenchError(f"{source}: rules.nonempty must name fields among {list(FIELDS)}")
    names = {c.code: c.name for f in FIELDS for c in fields[f]}
    return Taxonomy(str(raw.get("name", "taxonomy")), fields["intent"], fields["function"],
                    fields["response"], severity, exclusive, nonempty, source, names)


@cache
def _builtin_taxonomy() -> Taxonomy:
    raw, src = _read_yaml(None, "taxonomy.yaml")
    return parse_taxonomy(raw, src)


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The packaged taxonomy, or a user's YAML file of the same shape."""
    if path is None:
        return _builtin_taxonomy()
    raw, src = _read_yaml(path, "taxonomy.yaml")
    return parse_taxonomy(raw, src)


# ----------------------------------------------------------------------------- contexts

CONTRACT_FIELDS = ("length", "structure", "addressee", "goal")


@dataclass(frozen=True, slots=True)
class Context:
    """An application context and its interaction contract (VEILED-SH, §3.2)."""

    name: str
    label: str
    length: str
    structure: str
    addressee: str
    goal: str

    def contract_text(self) -> str:
        return (f"Context: {self.label}\n- Length: {self.length}\n- Structure: {self.structure}\n"
                f"- Addressee: {self.addressee}\n- Communicative goal: {self.goal}")


def load_contexts(path: str | Path | None = None) -> dict[str, Context]:
    """The packaged contexts (forum, counselor_chat, platform_search, triage) or a user's YAML."""
    raw, src = _read_yaml(path, "contexts.yaml")
    if not isinstance(raw, Mapping) or not raw:
        raise CarebenchError(f"{src}: contexts must be a mapping of name -> contract")
    out: dict[str, Context] = {}
    for name, spec in raw.items():
        if not isinstance(spec, Mapping):
            raise CarebenchError(f"{src}: context {name!r} must be a mapping")
        missing = [f for f in CONTRACT_FIELDS if not str(spec.get(f, "")).strip()]
        if missing:
            raise CarebenchError(f"{src}: context {name!r} lacks {', '.join(missing)}")
        out[str(name)] = Context(str(name), str(spec.get("label", name)),
                                 *(str(spec[f]).strip() for f in CONTRACT_FIELDS))
    return out

"""GBNF grammars for constrained answers from llama.cpp models.

A grammar makes a small local model emit exactly a label or JSON of the requested
shape, so the answer parses without tolerant guessing. Grammar text is produced
here as plain strings (testable without llama.cpp); ``llamacpp`` compiles it.

JSON schemas in the subset carebench's prompts use go through a small converter of
our own: objects with (required or optional) properties of type integer (``enum``/
``minimum``/``maximum``), number, string (``enum``/``minLength``/``maxLength``),
boolean, null, ``const``, ``anyOf``/``oneOf``, local ``$ref``, nested objects and
arrays (``minItems``/``maxItems``), and sets of distinct enum values (``uniqueItems``,
with ``contains``/``allOf`` of ``contains: {const}`` for values that must be present),
which it writes in the enum's order. It emits compact JSON (no whitespace) with properties in
schema order and no extra properties. Schemas beyond that subset go to llama.cpp's
own converter when ``llama_cpp`` is importable (see ``json_grammar`` for why ours
comes first).
"""

from __future__ import annotations

import json
import re
from typing import Any

from carebench.types import CarebenchError, StructuredSpec

#: largest integer range spelled out as literal alternatives (beyond it: any integer)
_MAX_INT_ENUM = 1000
#: keywords the built-in converter implements; anything else goes to llama.cpp's
_SUPPORTED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "anyOf",
    "oneOf",
    "uniqueItems",
    "contains",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
}
#: annotations that do not constrain the value
_IGNORED = {"title", "description", "default", "examples", "$schema", "$id", "$comment"}

_PRIMITIVES = {
    "ws-boolean": '"true" | "false"',
    "ws-null": '"null"',
    "ws-int": '"-"? ([0-9] | [1-9] [0-9]*)',
    "ws-nonneg-int": "[0-9] | [1-9] [0-9]*",
    "ws-number": '"-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?',
    "ws-char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "ws-string": '"\\"" ws-char* "\\""',
}


def gbnf_literal(text: str) -> str:
    """Quote ``text`` as a GBNF string literal (escaping quotes, backslashes, controls)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def choice_grammar(labels: tuple[str, ...] | list[str]) -> str:
    """A grammar whose only sentences are the labels themselves, nothing before or after."""
    labs = [str(lab) for lab in labels]
    if not labs:
        raise CarebenchError("a choice answer needs at least one label")
    if any(lab == "" for lab in labs):
        raise CarebenchError(f"empty label in choice answer labels {labs!r}")
    unique = list(dict.fromkeys(labs))
    return "root ::= " + " | ".join(gbnf_literal(lab) for lab in unique) + "\n"


def _load_schema(schema_json: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema_json, dict):
        return schema_json
    try:
        schema = json.loads(schema_json)
    except json.JSONDecodeError as e:
        raise CarebenchError(f"structured answer schema is not valid JSON: {e}") from None
    if not isinstance(schema, dict):
        raise CarebenchError("structured answer schema must be a JSON object")
    return schema


class UnsupportedSchema(CarebenchError):
    """The schema uses JSON-Schema features the built-in converter does not implement."""


def _compact(value: Any) -> str:
    """JSON text as the grammar writes it: no whitespace between tokens."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _contains_const(member: Any, hint: str) -> Any:
    """The value of ``{"contains": {"const": v}}`` (the only allOf member the converter reads)."""
    if not (isinstance(member, dict) and set(member) == {"contains"} and isinstance(member["contains"], dict)
            and set(member["contains"]) == {"const"}):
        raise UnsupportedSchema(f"schema at {hint!r}: allOf members other than "
                                "{'contains': {'const': value}} are not implemented")
    return member["contains"]["const"]


def _repeat(lo: int, hi: int | None) -> str:
    """GBNF repetition suffix for ``lo``..``hi`` occurrences (``hi=None``: unbounded)."""
    if hi is None:
        return "*" if lo == 0 else ("+" if lo == 1 else f"{{{lo},}}")
    if (lo, hi) == (0, 1):
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _bounds(schema: dict[str, Any], lo_key: str, hi_key: str, hint: str) -> tuple[int, int | None]:
    lo = int(schema.get(lo_key, 0))
    hi = schema.get(hi_key)
    hi = None if hi is None else int(hi)
    if lo < 0 or (hi is not None and hi < lo):
        raise CarebenchError(f"schema at {hint!r} has {lo_key} {lo} > {hi_key} {hi}")
    return lo, hi


class _Converter:
    """Turns the supported JSON-Schema subset into GBNF rules, one rule per sub-schema."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.rules: dict[str, str] = {}
        self.used_primitives: set[str] = set()
        self.defs: dict[str, Any] = {
            **{f"#/definitions/{k}": v for k, v in (root.get("definitions") or {}).items()},
            **{f"#/$defs/{k}": v for k, v in (root.get("$defs") or {}).items()},
        }
        self.expanding: list[str] = []
        self.expanded: dict[str, str] = {}

    def _name(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, i = base, 1
        while name in self.rules or name in _PRIMITIVES or name == "root":
            i += 1
            name = f"{base}-{i}"
        return name

    def _prim(self, name: str) -> str:
        self.used_primitives.add(name)
        if name == "ws-string":
            self.used_primitives.add("ws-char")
        return name

    def _add(self, hint: str, body: str) -> str:
        name = self._name(hint)
        self.rules[name] = body
        return name

    def expr(self, schema: Any, hint: str) -> str:
        """A GBNF expression (a rule name or a parenthesised alternation) for ``schema``."""
        if schema is True or schema == {}:
            raise CarebenchError(f"schema at {hint!r} allows any value; give it a type")
        if not isinstance(schema, dict):
            raise CarebenchError(f"schema at {hint!r} must be an object, got {schema!r}")
        unknown = set(schema) - _SUPPORTED - _IGNORED
        if unknown:
            raise UnsupportedSchema(
                f"schema at {hint!r} uses {', '.join(sorted(unknown))}, which the built-in "
                "grammar converter does not implement"
            )
        if schema.get("additionalProperties", False) not in (False, None):
            raise UnsupportedSchema(f"object at {hint!r} allows additional properties")
        if "$ref" in schema:
            return self._ref(schema["$ref"], hint)
        if ("allOf" in schema or "contains" in schema) and not schema.get("uniqueItems"):
            raise UnsupportedSchema(
                f"schema at {hint!r} uses allOf/contains outside a uniqueItems array of enum values"
            )
        if "const" in schema:
            return gbnf_literal(_compact(schema["const"]))
        if "enum" in schema:
            vals = schema["enum"]
            if not vals:
                raise CarebenchError(f"empty enum at {hint!r}")
            alts = " | ".join(gbnf_literal(_compact(v)) for v in vals)
            return f"({alts})"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                alts = [self.expr(s, f"{hint}-{i}") for i, s in enumerate(schema[key])]
                return "(" + " | ".join(alts) + ")"
        typ = schema.get("type")
        if isinstance(typ, list):
            alts = [self.expr({**schema, "type": t}, f"{hint}-{t}") for t in typ]
            return "(" + " | ".join(alts) + ")"
        if typ is None and "properties" in schema:
            typ = "object"
        if typ == "object":
            return self._object(schema, hint)
        if typ == "array":
            return self._array(schema, hint)
        if typ == "integer":
            return self._integer(schema, hint)
        if typ == "number":
            return self._prim("ws-number")
        if typ == "string":
            return self._string(schema, hint)
        if typ == "boolean":
            return self._prim("ws-boolean")
        if typ == "null":
            return self._prim("ws-null")
        raise CarebenchError(f"unsupported schema type {typ!r} at {hint!r}")

    def _ref(self, ref: str, hint: str) -> str:
        """Inline a local definition (pydantic puts nested models and enums in ``$defs``)."""
        if ref not in self.defs:
            raise UnsupportedSchema(
                f"schema at {hint!r} refers to {ref!r}, not a local $defs entry"
            )
        if ref in self.expanding:
            raise UnsupportedSchema(f"schema at {hint!r} is recursive through {ref!r}")
        if ref in self.expanded:  # one rule per definition, however often it is referenced
            return self.expanded[ref]
        self.expanding.append(ref)
        try:
            self.expanded[ref] = self.expr(self.defs[ref], ref.rsplit("/", 1)[-1])
            return self.expanded[ref]
        finally:
            self.expanding.pop()

    def _integer(self, schema: dict[str, Any], hint: str) -> str:
        lo = schema.get("minimum")
        hi = schema.get("maximum")
        if "exclusiveMinimum" in schema:
            lo = int(schema["exclusiveMinimum"]) + 1
        if "exclusiveMaximum" in schema:
            hi = int(schema["exclusiveMaximum"]) - 1
        if lo is not None and hi is not None:
            lo_i, hi_i = int(lo), int(hi)
            if lo_i > hi_i:
                raise CarebenchError(f"integer at {hint!r} has minimum {lo} > maximum {hi}")
            if hi_i - lo_i < _MAX_INT_ENUM:
                # longest literals first so "10" is never cut short as "1"
                vals = sorted(range(lo_i, hi_i + 1), key=lambda v: (-len(str(v)), v))
                return self._add(hint, " | ".join(gbnf_literal(str(v)) for v in vals))
        if lo is not None and int(lo) >= 0:
            return self._prim("ws-nonneg-int")
        return self._prim("ws-int")

    def _array(self, schema: dict[str, Any], hint: str) -> str:
        items = schema.get("items")
        if not isinstance(items, dict):
            raise CarebenchError(f"array at {hint!r} needs one 'items' schema")
        lo, hi = _bounds(schema, "minItems", "maxItems", hint)
        if hi == 0:
            return self._add(hint, '"[" "]"')
        if schema.get("uniqueItems"):
            return self._unique_set(schema, items, lo, hi, hint)
        item = self.expr(items, f"{hint}-item")
        more = f'("," {item}){_repeat(max(lo - 1, 0), None if hi is None else hi - 1)}'
        if lo == 0:
            return self._add(hint, f'"[" ({item} {more})? "]"')
        return self._add(hint, f'"[" {item} {more} "]"')

    def _unique_set(self, schema: dict[str, Any], items: dict[str, Any], lo: int, hi: int | None,
                    hint: str) -> str:
        """A set of distinct enum values, written in the enum's order (a canonical order).

        Values named by ``contains``/``allOf: [{contains: {const}}]`` are mandatory. The
        grammar is linear in the number of values: each position is written or skipped,
        with a comma before every written value but the first.
        """
        values = items.get("enum", [items["const"]] if "const" in items else None)
        if not values or set(items) - {"enum", "const", "type"} - _IGNORED:
            raise UnsupportedSchema(f"uniqueItems array at {hint!r} needs items given by enum or const")
        required = [_contains_const(c, hint) for c in schema.get("allOf", [])]
        if "contains" in schema:
            required.append(_contains_const({"contains": schema["contains"]}, hint))
        texts = [_compact(v) for v in values]
        if len(set(texts)) != len(texts) or any(_compact(r) not in texts for r in required):
            raise UnsupportedSchema(f"uniqueItems array at {hint!r}: repeated enum values or "
                                    "a contained value outside the enum")
        must = [_compact(r) in {_compact(x) for x in required} for r in values]
        if lo > max(1, sum(must)) or (hi is not None and hi < len(values)):
            raise UnsupportedSchema(f"uniqueItems array at {hint!r}: minItems/maxItems beyond "
                                    "'at least one' are not implemented")
        if lo == 0 and not any(must):
            return self._add(hint, f'"[" ({self._subsequence(texts, must, hint)})? "]"')
        return self._add(hint, f'"[" {self._subsequence(texts, must, hint)} "]"')

    def _subsequence(self, texts: list[str], must: list[bool], hint: str) -> str:
        """Rule for a non-empty subsequence of ``texts`` that keeps every ``must`` value."""
        n = len(texts)
        lits = [gbnf_literal(t) for t in texts]
        # rest[i]: the values i.. each preceded by a comma (possibly none of them)
        rest: list[str | None] = [None] * (n + 1)
        for i in range(n - 1, 0, -1):
            part = f'"," {lits[i]}' if must[i] else f'("," {lits[i]})?'
            body = part if rest[i + 1] is None else f"{part} {rest[i + 1]}"
            rest[i] = self._add(f"{hint}-rest-{i}", body)
        # first[i]: a non-empty subsequence of i.. whose first value has no comma
        first: list[str | None] = [None] * (n + 1)
        for i in range(n - 1, -1, -1):
            start = lits[i] if rest[i + 1] is None else f"{lits[i]} {rest[i + 1]}"
            if must[i] or first[i + 1] is None:
                body = start
            else:
                body = f"{start} | {first[i + 1]}"
            first[i] = self._add(f"{hint}-first-{i}", body)
        assert first[0] is not None
        return first[0]

    def _string(self, schema: dict[str, Any], hint: str) -> str:
        lo, hi = _bounds(schema, "minLength", "maxLength", hint)
        if lo == 0 and hi is None:
            return self._prim("ws-string")
        self._prim("ws-char")
        return self._add(hint, f'"\\"" ws-char{_repeat(lo, hi)} "\\""')

    def _object(self, schema: dict[str, Any], hint: str) -> str:
        props: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        unknown = required - set(props)
        if unknown:
            raise CarebenchError(
                f"object at {hint!r} requires properties without a schema: {sorted(unknown)}"
            )
        if not props:
            return self._add(hint, '"{" "}"')
        kvs: list[tuple[str, bool]] = []
        for key, sub in props.items():
            value = self.expr(sub, f"{hint}-{key}")
            kv = gbnf_literal(json.dumps(key, ensure_ascii=False) + ":") + " " + value
            kvs.append((self._add(f"{hint}-{key}-kv", kv), key in required))
        req = [name for name, is_req in kvs if is_req]
        opt = [name for name, is_req in kvs if not is_req]
        # optional properties follow the required ones (fixed order keeps the grammar small)
        body = ' "," '.join(req)
        if opt:
            # opt-i: a non-empty, ordered subsequence of opt[i:]
            names = [self._name(f"{hint}-opt-{i}") for i in range(len(opt))]
            for i, name in enumerate(names):
                if i + 1 < len(opt):
                    self.rules[name] = f'{opt[i]} ("," {names[i + 1]})? | {names[i + 1]}'
                else:
                    self.rules[name] = opt[i]
            body = f'{body} ("," {names[0]})?' if req else f"({names[0]})?"
        return self._add(hint, f'"{{" {body} "}}"')


def json_grammar_builtin(schema_json: str | dict[str, Any]) -> str:
    """Convert the supported JSON-Schema subset to GBNF without llama.cpp."""
    schema = _load_schema(schema_json)
    conv = _Converter(schema)
    root = conv.expr(schema, "value")
    lines = [f"root ::= {root}"]
    lines += [f"{name} ::= {body}" for name, body in conv.rules.items()]
    lines += [f"{name} ::= {_PRIMITIVES[name]}" for name in sorted(conv.used_primitives)]
    return "\n".join(lines) + "\n"


def json_grammar(schema_json: str | dict[str, Any]) -> str:
    """GBNF for JSON matching ``schema_json``.

    The built-in converter comes first for the subset it implements: llama-cpp-python's
    ``json_schema_to_gbnf`` (0.3.36) ignores integer ``minimum``/``maximum`` and lets raw
    control characters into strings, so on carebench's own schemas it is less exact.
    Schemas outside the subset (``$ref``, ``pattern``, ``format`` ...) go to llama.cpp.
    """
    schema = _load_schema(schema_json)
    try:
        return json_grammar_builtin(schema)
    except UnsupportedSchema as unsupported:
        try:
            from llama_cpp.llama_grammar import json_schema_to_gbnf
        except ImportError:
            raise CarebenchError(
                f"{unsupported}; install llama-cpp-python for full JSON-Schema support"
            ) from None
        try:
            return json_schema_to_gbnf(json.dumps(schema))
        except Exception as e:  # noqa: BLE001 - llama.cpp's converter raises assorted errors
            raise CarebenchError(f"cannot convert the answer schema to a grammar: {e}") from None


def grammar_for(spec: StructuredSpec) -> str:
    """The GBNF grammar text for a structured-answer request."""
    if spec.kind == "choice":
        return choice_grammar(spec.labels)
    if spec.kind == "json":
        schema = spec.grammar_schema_json or spec.schema_json
        if not schema:
            raise CarebenchError(f"structured answer {spec.name!r} of kind json has no schema")
        return json_grammar(schema)
    raise CarebenchError(f"unknown structured answer kind {spec.kind!r}")

"""OpenAI's strict structured-output rules, written from its Structured Outputs guide
("Supported schemas"), as an independent check of every schema carebench sends with
``"strict": true``: the root an object (not ``anyOf``); every object with
``additionalProperties: false`` and every property in ``required``; only the supported
keywords (no ``default``, ``minLength``/``maxLength``, ``uniqueItems`` ...); ``$ref`` only
into the schema's own ``$defs``; at most 10 levels of nesting, 5000 properties and 1000
enum values."""

from __future__ import annotations

from typing import Any

COMMON = {"type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs"}
BY_TYPE = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"pattern", "format"},
    "number": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "integer": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
}
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def violations(schema: Any) -> list[str]:
    out: list[str] = []
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        return ["the root must be an object schema, not anyOf"]
    counts = {"properties": 0, "enum": 0}

    def walk(s: Any, path: str, depth: int) -> None:
        if not isinstance(s, dict) or not s:
            out.append(f"{path}: a schema must be a non-empty object")
            return
        if depth > 10:
            out.append(f"{path}: nested deeper than 10 levels")
        types = s.get("type")
        tlist = types if isinstance(types, list) else [types] if types is not None else []
        if any(t not in TYPES for t in tlist):
            out.append(f"{path}: unknown type {types!r}")
        allowed = set(COMMON)
        for t in tlist:
            allowed |= BY_TYPE.get(t, set())
        if "properties" in s:
            allowed |= BY_TYPE["object"]
        for k in s:
            if k not in allowed:
                out.append(f"{path}: keyword {k!r} is not supported in strict mode")
        if s.get("format") is not None and s["format"] not in FORMATS:
            out.append(f"{path}: format {s['format']!r} is not supported")
        if "object" in tlist or "properties" in s:
            props = s.get("properties")
            if not isinstance(props, dict):
                out.append(f"{path}: an object needs properties")
                props = {}
            if s.get("additionalProperties") is not False:
                out.append(f"{path}: additionalProperties must be false")
            if sorted(s.get("required") or []) != sorted(props) or len(s.get("required") or []) != len(props):
                out.append(f"{path}: every property must be required (got {s.get('required')!r})")
            counts["properties"] += len(props)
            for name, p in props.items():
                walk(p, f"{path}.{name}", depth + 1)
        if "array" in tlist:
            if "items" not in s:
                out.append(f"{path}: an array needs items")
            else:
                walk(s["items"], f"{path}[]", depth + 1)
        for i, b in enumerate(s.get("anyOf") or []):
            walk(b, f"{path}|{i}", depth)
        if "enum" in s:
            counts["enum"] += len(s["enum"])
        ref = s.get("$ref")
        if ref is not None:
            parts = ref[len("#/$defs/"):] if isinstance(ref, str) and ref.startswith("#/$defs/") else None
            if parts is None or parts not in (schema.get("$defs") or {}):
                out.append(f"{path}: $ref {ref!r} does not point into $defs")
        if "$defs" in s and path != "$":
            out.append(f"{path}: $defs only at the root")
        for name, d in (s.get("$defs") or {}).items() if path == "$" else ():
            walk(d, f"$defs.{name}", 1)

    walk(schema, "$", 1)
    if counts["properties"] > 5000:
        out.append("more than 5000 properties")
    if counts["enum"] > 1000:
        out.append("more than 1000 enum values")
    return out

"""The form of an answer schema that OpenAI's strict structured outputs accept.

A schema sent with ``"strict": true`` must keep to a subset of JSON Schema: every object
closed (``additionalProperties: false``), every property listed in ``required`` (an
optional one made nullable instead), no ``default``, and only the keywords the subset
supports. A schema outside it is refused with HTTP 400: a live call then falls back to
``json_object``, but a batch line has no fallback and fails every round.

:func:`strict_schema` rewrites any answer schema (a pydantic ``model_json_schema`` or a
hand-written one) into that subset, so every schema carebench sends as strict keeps to
it by construction. Validation-only keywords the subset lacks (``maxLength``,
``uniqueItems`` ...) are dropped: the answer is validated after parsing anyway (the
pydantic model, or the suite's own checks). A schema that has no strict form (a map
with free keys, a tuple, a root that is not an object) gives None: it is then sent
with ``"strict": false``. A property that was optional may now come back ``null``:
:func:`carebench.models.structured.parse_model` reads that as absent.
"""

from __future__ import annotations

import copy
from typing import Any

#: keywords OpenAI's strict mode supports, by the type they apply to
STRICT_KEYWORDS: dict[str, frozenset[str]] = {
    "any": frozenset({"type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "string": frozenset({"pattern", "format"}),
    "number": frozenset({"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"}),
}
#: string formats the strict mode supports
STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_ALLOWED = frozenset().union(*STRICT_KEYWORDS.values())
#: keywords that only narrow what is valid: dropped (the answer is validated after parsing)
_DROPPED = frozenset({
    "default", "examples", "minLength", "maxLength", "uniqueItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "unevaluatedItems", "unevaluatedProperties", "propertyNames",
    "discriminator", "readOnly", "writeOnly", "deprecated", "$comment", "$schema", "$id",
    "contentEncoding", "contentMediaType",
})


class _NoStrictForm(Exception):
    pass


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` in OpenAI's strict subset (a new dict), or None if it has no strict form."""
    if not isinstance(schema, dict):
        return None
    root = copy.deepcopy(schema)
    try:
        out = _node(root, root)
    except _NoStrictForm:
        return None
    return out if out.get("type") == "object" and "properties" in out else None


def _nullable(s: dict[str, Any]) -> bool:
    t = s.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "const" in s and s["const"] is None or None in (s.get("enum") or ()):
        return True
    return any(isinstance(b, dict) and _nullable(b) for b in s.get("anyOf") or ())


def _node(s: Any, root: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(s, dict) or not s:
        raise _NoStrictForm  # ``{}`` (any value) and ``true`` have no strict form
    if "oneOf" in s:  # exactly one of: at least one of (the answer is validated after parsing)
        s["anyOf"] = s.pop("oneOf")
    if "allOf" in s:
        parts = s.pop("allOf")
        if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
            raise _NoStrictForm
        s = {**parts[0], **s}
    for key in list(s):
        if key in _DROPPED or (key == "format" and s[key] not in STRICT_FORMATS):
            del s[key]
        elif key not in _ALLOWED:
            raise _NoStrictForm  # prefixItems, patternProperties, not, if/then/else ...
    ref = s.get("$ref")
    if ref is not None and len(s) > 1:  # a $ref with siblings: inline what it points to
        s.pop("$ref")
        return _node({**_resolve(root, ref), **s}, root)
    if isinstance(s.get("$defs"), dict):
        s["$defs"] = {k: _node(v, root) for k, v in s["$defs"].items()}
    t = s.get("type")
    if t == "object" or "properties" in s:
        extra = s.get("additionalProperties", False)
        if extra is not False:
            raise _NoStrictForm  # a map with free keys
        before = s.get("required") or []
        props = {}
        for name, prop in (s.get("properties") or {}).items():
            prop = _node(prop, root)
            if name not in before and not _nullable(prop):
                prop = {"anyOf": [prop, {"type": "null"}]}
            props[name] = prop
        s.update(type="object", properties=props, required=list(props), additionalProperties=False)
    if (t == "array" or (isinstance(t, list) and "array" in t)) and "items" not in s:
        raise _NoStrictForm
    if "items" in s:
        s["items"] = _node(s["items"], root)
    if "anyOf" in s:
        if not isinstance(s["anyOf"], list) or not s["anyOf"]:
            raise _NoStrictForm
        s["anyOf"] = [_node(b, root) for b in s["anyOf"]]
    return s


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise _NoStrictForm
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            raise _NoStrictForm
        node = node[part]
    if not isinstance(node, dict):
        raise _NoStrictForm
    return copy.deepcopy(node)

"""A JSON schema of a policy answer that encodes the taxonomy's cross-field rules.

An invalid label combination is an error, never silently repaired (VEILED-SH,
Appendix B.2). With a schema that only lists the codes, a grammar-constrained
decoder still writes a severity without its intent or ``FUNCTION_U`` beside
another function, and every such answer is scored as a failure. This schema
makes those answers unwritable: it is derived from the taxonomy (so a user's
``--taxonomy`` file gets its own rules), and the answer is still validated after
parsing by ``Taxonomy.validate_policy``, which stays the reference.

What the schema expresses, per field: the codes of the vocabulary, no repeated
code (``uniqueItems``), a non-empty set where the taxonomy asks for one
(``minItems``), an exclusive code only on its own (``anyOf``); across fields: a
severity exactly when its intent is chosen, at one of its scale's levels (the
root is an ``anyOf`` with one branch per combination of severity-bearing
intents, whose intent array ``contains`` exactly those intents); a RESPONSE category
the taxonomy flags ``harmful`` (a behaviour no response may show) is never a code a
policy may request. A grammar built
from it (``carebench.models.grammar``) writes each set in the taxonomy's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from carebench.taxonomy import SEVERITY_KINDS, Taxonomy

#: property name of each severity kind in an answer (``nssi`` -> ``nssi_severity``)
SEVERITY_PROPERTY = {kind: f"{kind}_severity" for kind in SEVERITY_KINDS}


def _code_set(codes: list[str], *, required: bool, contains: tuple[str, ...] = ()) -> dict[str, Any]:
    """An array of distinct codes drawn from ``codes`` that includes every code in ``contains``."""
    schema: dict[str, Any] = {
        "type": "array",
        "items": {"type": "string", "enum": codes},
        "uniqueItems": True,
        "maxItems": len(codes),
    }
    if required or contains:
        schema["minItems"] = max(1, len(contains))
    if contains:
        schema["allOf"] = [{"contains": {"const": c}} for c in contains]
    return schema


def _field_schema(
    taxonomy: Taxonomy, field: str, *, required: bool, forbidden: frozenset[str] = frozenset(),
    contains: tuple[str, ...] = (),
) -> dict[str, Any] | None:
    """Every valid value of one field: an exclusive code alone, or a set of the others.

    ``forbidden`` codes may not appear, ``contains`` codes must; None when nothing is valid.
    """
    codes = [c for c in taxonomy.codes(field) if c not in forbidden]
    exclusive = [c for c in codes if c in taxonomy.exclusive]
    others = [c for c in codes if c not in taxonomy.exclusive]
    alternatives: list[dict[str, Any]] = [
        {"const": [c]} for c in exclusive if set(contains) <= {c}
    ]
    if others and set(contains) <= set(others):
        alternatives.append(_code_set(others, required=required, contains=contains))
    elif not required and not contains:
        alternatives.append({"type": "array", "items": {"type": "string"}, "maxItems": 0})
    if not alternatives:
        return None
    return alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}


def policy_schema(
    taxonomy: Taxonomy, *, with_response: bool = True, extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """JSON schema of ``{intent, <kind>_severity..., function[, response], **extra}``.

    ``with_response=False`` is an interpretation without its RESPONSE part (the first
    judge of a cascade). ``extra`` properties (e.g. a rationale) are required too.
    Property order is the answer's order: intent, severities, function, response, extra.
    """
    required = set(taxonomy.nonempty)
    defs: dict[str, Any] = {}
    shared = ["function"] + (["response"] if with_response else [])
    harmful = frozenset(taxonomy.harmful_codes())  # behaviours no policy may request
    for f in shared:
        sub = _field_schema(taxonomy, f, required=f in required, forbidden=harmful if f == "response" else frozenset())
        if sub is None:
            raise ValueError(f"taxonomy {taxonomy.name!r} allows no valid {f} set")
        defs[f] = sub
    for name, sub in (extra or {}).items():
        defs[name] = sub

    scales = {kind: scale for kind, scale in taxonomy.severity.items() if kind in SEVERITY_PROPERTY}
    severity_intents = sorted({s.intent for s in scales.values()}, key=taxonomy.codes("intent").index)
    # a scale of another kind has no answer property, so its intent can never be valid
    unanswerable = {s.intent for k, s in taxonomy.severity.items() if k not in SEVERITY_PROPERTY}
    branches = []
    for n in range(len(severity_intents) + 1):
        for chosen in combinations(severity_intents, n):
            intent = _field_schema(
                taxonomy, "intent", required="intent" in required,
                forbidden=(frozenset(severity_intents) - set(chosen)) | unanswerable, contains=chosen,
            )
            if intent is None:
                continue
            props: dict[str, Any] = {"intent": intent}
            for kind, prop in SEVERITY_PROPERTY.items():
                scale = scales.get(kind)
                if scale is not None and scale.intent in chosen:
                    props[prop] = {"type": "integer", "enum": list(scale.values)}
                else:
                    props[prop] = {"type": "null"}
            for name in shared + list(extra or {}):
                props[name] = {"$ref": f"#/$defs/{name}"}
            branches.append({
                "type": "object", "properties": props, "required": list(props),
                "additionalProperties": False,
            })
    if not branches:
        raise ValueError(f"taxonomy {taxonomy.name!r} allows no valid intent set")
    root: dict[str, Any] = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {**root, "$defs": defs}


def api_policy_schema(
    taxonomy: Taxonomy, *, with_response: bool = True, extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The same answer in the subset strict API modes accept (OpenAI's strict ``json_schema``:
    an object root, every property required, no ``uniqueItems``/``contains``/root ``anyOf``).

    It keeps codes in their vocabularies and severities on their scales; the cross-field
    rules that :func:`policy_schema` adds are checked after parsing instead (an invalid
    combination is still scored wrong). Grammar decoders get :func:`policy_schema`.
    """
    def codes(field: str) -> dict[str, Any]:
        vocab = [c for c in taxonomy.codes(field) if field != "response" or c not in taxonomy.harmful_codes()]
        return {"type": "array", "items": {"type": "string", "enum": vocab}, "maxItems": len(vocab)}

    props: dict[str, Any] = {"intent": codes("intent")}
    for kind, prop in SEVERITY_PROPERTY.items():
        scale = taxonomy.severity.get(kind)
        values = list(scale.values) if scale is not None else []
        props[prop] = {"anyOf": [{"type": "integer", "enum": values}, {"type": "null"}]} if values \
            else {"type": "null"}
    props["function"] = codes("function")
    if with_response:
        props["response"] = codes("response")
    props.update(extra or {})
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

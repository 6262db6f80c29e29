"""Plural run records and the dense arrays every analysis runs on.

A run writes one ``records.jsonl`` line per system response
(:class:`ResponseRecord`: a system answering one prompt under one archetype's
instruction) and one per judge verdict on that response against one profile's
reference policy (:class:`JudgmentRecord`). Re-scoring reads them back into
:class:`JuryData`: arrays indexed ``[system, profile, prompt, judge]`` over
sorted vocabularies, so a rescore of the same records gives byte-identical
metrics whatever the line order, and a paper-scale run (180,090 verdicts) is
scored in seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.plural.scoring import ERROR, JUDGMENT_STATUSES, category_mask
from carebench.types import CarebenchError

#: Statuses of one system response (as the runner records a completion).
RESPONSE_STATUSES: tuple[str, ...] = ("ok", "empty", "content_filter", "truncated", "error")
#: Response statuses that are the system's answer but carry no text to judge.
UNJUDGEABLE = ("empty", "content_filter")


@dataclass(slots=True)
class ResponseRecord:
    """One system's reply to one prompt under one archetype instruction."""

    system: str
    archetype: str
    prompt_id: str
    text: str
    status: str = "ok"
    usage: dict[str, int] | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "response", "system": self.system, "archetype": self.archetype,
                "prompt_id": self.prompt_id, "status": self.status, "text": self.text,
                "usage": self.usage, "latency_s": self.latency_s, "cost_usd": self.cost_usd,
                "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResponseRecord:
        return cls(str(d["system"]), str(d["archetype"]), str(d["prompt_id"]), str(d.get("text") or ""),
                   str(d.get("status") or "ok"), d.get("usage"), d.get("latency_s"), d.get("cost_usd"),
                   d.get("error"))


@dataclass(slots=True)
class JudgmentRecord:
    """One judge's verdict on one response against one profile's reference policy."""

    system: str
    archetype: str
    prompt_id: str
    profile: str
    judge: str
    status: str  # one of JUDGMENT_STATUSES
    appropriate: bool | None = None
    categories: list[str] = field(default_factory=list)
    rationale: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "judgment", "system": self.system, "archetype": self.archetype,
                "prompt_id": self.prompt_id, "profile": self.profile, "judge": self.judge,
                "status": self.status, "appropriate": self.appropriate,
                "categories": list(self.categories), "rationale": self.rationale}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgmentRecord:
        return cls(str(d["system"]), str(d["archetype"]), str(d["prompt_id"]), str(d["profile"]),
                   str(d["judge"]), str(d.get("status") or "ok"), d.get("appropriate"),
                   list(d.get("categories") or []), str(d.get("rationale") or ""))


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """What scoring needs of a sampled prompt: its cluster and its context."""

    id: str
    source_id: str
    context: str
    source_group: str = ""


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """What scoring needs of one profile's reference policy for one prompt."""

    prompt_id: str
    profile: str
    archetype: str
    response: tuple[str, ...]
    nssi_severity: int | None = None
    suicidal_severity: int | None = None


@dataclass
class JuryData:
    """Everything scoring reads, as dense arrays over sorted vocabularies.

    ``status[s, p, n, j]`` holds :data:`JUDGMENT_STATUSES` codes; cells with no
    recorded judgment are ``ERROR`` and ``present`` is false there.
    ``policy[p, n]`` is the profile's RESPONSE set as a bitmask over
    ``categories``; ``nssi``/``suicidal`` are its severities (0 = none).
    """

    systems: list[str]
    profiles: list[str]
    archetype_of: list[str]
    prompts: list[PromptInfo]
    judges: list[str]
    categories: list[str]
    status: np.ndarray
    present: np.ndarray
    appropriate: np.ndarray
    satisfied: np.ndarray
    policy: np.ndarray
    has_policy: np.ndarray
    nssi: np.ndarray
    suicidal: np.ndarray
    response_status: dict[str, dict[str, dict[str, int]]]  # system -> archetype -> status -> count

    @property
    def archetypes(self) -> list[str]:
        return sorted(set(self.archetype_of))

    @property
    def groups(self) -> np.ndarray:
        return np.array([p.source_id for p in self.prompts], dtype=object)

    @property
    def contexts(self) -> np.ndarray:
        return np.array([p.context for p in self.prompts], dtype=object)


def build_jury_data(
    prompts: Sequence[PromptInfo],
    policies: Iterable[PolicyInfo],
    responses: Iterable[ResponseRecord | Mapping[str, Any]],
    judgments: Iterable[JudgmentRecord | Mapping[str, Any]],
    categories: Sequence[str],
) -> JuryData:
    """Dense arrays from records. Unknown prompts, profiles or categories are errors."""
    prompts = sorted(prompts, key=lambda p: p.id)
    n_of = {p.id: i for i, p in enumerate(prompts)}
    if len(n_of) != len(prompts):
        raise CarebenchError("sampled prompts repeat an id")
    policies = list(policies)
    profiles = sorted({p.profile for p in policies})
    p_of = {p: i for i, p in enumerate(profiles)}
    archetype_of = [""] * len(profiles)
    P, N = len(profiles), len(prompts)
    policy = np.zeros((P, N), np.int64)
    has_policy = np.zeros((P, N), bool)
    nssi = np.zeros((P, N), np.int8)
    suicidal = np.zeros((P, N), np.int8)
    for pol in policies:
        n = n_of.get(pol.prompt_id)
        if n is None:
            continue  # a policy of a prompt outside the sample
        p = p_of[pol.profile]
        archetype_of[p] = pol.archetype
        policy[p, n] = category_mask(pol.response, categories)
        has_policy[p, n] = True
        nssi[p, n] = pol.nssi_severity or 0
        suicidal[p, n] = pol.suicidal_severity or 0
    cols: dict[str, list[Any]] = {k: [] for k in ("system", "profile", "prompt_id", "judge", "status",
                                                  "appropriate", "categories")}
    for rec in judgments:
        d = rec.to_dict() if isinstance(rec, JudgmentRecord) else rec
        for k in cols:
            cols[k].append(d.get(k))
    systems = sorted({str(s) for s in cols["system"]})
    resp_status: dict[str, dict[str, dict[str, int]]] = {}
    counts: Counter[tuple[str, str, str]] = Counter()
    for rec in responses:
        d = rec.to_dict() if isinstance(rec, ResponseRecord) else rec
        counts[(str(d["system"]), str(d["archetype"]), str(d.get("status") or "ok"))] += 1
    systems = sorted(set(systems) | {s for s, _, _ in counts})
    for (s, a, st), c in sorted(counts.items()):
        resp_status.setdefault(s, {}).setdefault(a, {})[st] = c
    judges = sorted({str(j) for j in cols["judge"]})
    S, J = len(systems), len(judges)
    s_of = {s: i for i, s in enumerate(systems)}
    j_of = {j: i for i, j in enumerate(judges)}
    st_of = {s: i for i, s in enumerate(JUDGMENT_STATUSES)}
    status = np.full((S, P, N, J), ERROR, np.int8)
    present = np.zeros((S, P, N, J), bool)
    appropriate = np.zeros((S, P, N, J), bool)
    satisfied = np.zeros((S, P, N, J), np.int64)
    try:
        n_idx = np.fromiter((n_of[x] for x in cols["prompt_id"]), np.int64, len(cols["prompt_id"]))
    except KeyError as e:
        raise CarebenchError(f"judgment of prompt {e.args[0]!r}, which is not in the run's prompts") from None
    try:
        p_idx = np.fromiter((p_of[x] for x in cols["profile"]), np.int64, len(cols["profile"]))
    except KeyError as e:
        raise CarebenchError(f"judgment against profile {e.args[0]!r}, which has no policies in the run") from None
    try:
        st = np.fromiter((st_of[x or "ok"] for x in cols["status"]), np.int8, len(cols["status"]))
    except KeyError as e:
        raise CarebenchError(f"judgment status {e.args[0]!r} is not one of {list(JUDGMENT_STATUSES)}") from None
    s_idx = np.fromiter((s_of[x] for x in cols["system"]), np.int64, len(cols["system"]))
    j_idx = np.fromiter((j_of[x] for x in cols["judge"]), np.int64, len(cols["judge"]))
    mask_of: dict[tuple[str, ...], int] = {}

    def mask(cats: Any) -> int:
        key = tuple(cats or ())
        m = mask_of.get(key)
        if m is None:
            m = mask_of[key] = category_mask(key, categories)
        return m

    idx = (s_idx, p_idx, n_idx, j_idx)
    status[idx] = st
    present[idx] = True
    appropriate[idx] = np.fromiter((bool(x) for x in cols["appropriate"]), bool, len(cols["appropriate"]))
    satisfied[idx] = np.fromiter((mask(x) for x in cols["categories"]), np.int64, len(cols["categories"]))
    return JuryData(systems, profiles, archetype_of, list(prompts), judges, list(categories), status, present,
                    appropriate, satisfied, policy, has_policy, nssi, suicidal, resp_status)


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Response and judgment rows of a run's ``records.jsonl`` (file:line on bad JSON)."""
    responses: list[dict[str, Any]] = []
    judgments: list[dict[str, Any]] = []
    loads = json.loads
    try:
        fh = Path(path).open(encoding="utf-8")
    except OSError as e:
        raise CarebenchError(f"{path}: cannot read records ({e.strerror})") from None
    with fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = loads(line)
            except ValueError as e:
                raise CarebenchError(f"{path}:{i}: invalid JSON ({e})") from None
            kind = d.get("kind")
            if kind == "judgment":
                judgments.append(d)
            elif kind == "response":
                responses.append(d)
            else:
                raise CarebenchError(f"{path}:{i}: field 'kind' must be 'response' or 'judgment', got {kind!r}")
    return responses, judgments

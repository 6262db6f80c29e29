"""Persona routing (VEILED-SH §4.2): sketch -> embed -> 10 nearest personas -> LLM pick.

The sketch model also infers age, sex, education, marital status and occupation;
with ``attributes="filter"`` those restrict the candidates (age as a range; other
fields only when the guess is a value the table uses), with ``"inform"`` (default)
they only go to the picker. A failed sketch routes on the source text itself; a
failed pick takes the most similar candidate; both are counted in the report.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from carebench.construct.calls import HARNESS_FAILURE, answer_status, ask_json
from carebench.construct.personas import attribute_mask, nearest, normalise, persona_matrix
from carebench.construct.prompts import pick_prompt, system_prompt, text_prompt
from carebench.construct.sources import Persona, WorkRow
from carebench.engine.run import Run
from carebench.models.base import ChatModel
from carebench.types import CarebenchError

ATTRIBUTE_MODES = ("inform", "filter")


class Sketch(BaseModel):
    sketch: str = Field(min_length=1)
    age: str | int | None = None
    sex: str | None = None
    education: str | None = None
    marital_status: str | None = None
    occupation: str | None = None


class Pick(BaseModel):
    choice: int


def route(
    rows: list[WorkRow],
    personas: list[Persona],
    embedder: Any,
    model: ChatModel,
    run: Run,
    *,
    k: int = 10,
    attributes: str = "inform",
    cache_dir: Any = None,
) -> tuple[list[WorkRow], dict[str, Any]]:
    if attributes not in ATTRIBUTE_MODES:
        raise CarebenchError(f"attributes must be one of {', '.join(ATTRIBUTE_MODES)}, got {attributes!r}")
    if not rows:
        return [], {"rows_in": 0, "rows_out": 0}
    table, cached = persona_matrix(personas, embedder, cache_dir)
    sketch_system = system_prompt("sketch")
    answers = ask_json(run, "persona sketches", model, [(r.id, sketch_system, text_prompt(r.text)) for r in rows],
                       Sketch, max_tokens=200)
    status: Counter = Counter()
    queries = []
    for r, a in zip(rows, answers, strict=True):
        if a.status == "ok":
            s: Sketch = a.value  # type: ignore[assignment]
            r.sketch = s.sketch
            r.inferred = {f: getattr(s, f) for f in ("age", "sex", "education", "marital_status", "occupation")
                          if getattr(s, f) is not None}
            queries.append(s.sketch)
        else:
            r.sketch, r.inferred = None, {}
            r.route_status = "sketch_failed" if answer_status(a) != HARNESS_FAILURE else HARNESS_FAILURE
            status[r.route_status] += 1
            queries.append(r.text)
    qmat = normalise(np.asarray(embedder.encode(queries), dtype=np.float32))
    mask = None
    relaxed = 0
    if attributes == "filter":
        mask = np.stack([attribute_mask(r.inferred, personas) for r in rows])
        empty = ~mask.any(axis=1)
        relaxed = int(empty.sum())
        mask[empty] = True  # nobody fits every guess: fall back to the whole table
    idx, _ = nearest(qmat, table, k=k, mask=mask)
    items = []
    pick_system = system_prompt("pick")
    for r, cand in zip(rows, idx, strict=True):
        r.candidates = [personas[int(i)].id for i in cand if i >= 0]
        user = pick_prompt(r.text, [personas[int(i)] for i in cand if i >= 0], r.inferred)
        items.append((r.id, pick_system, user))
    picks = ask_json(run, "persona picks", model, items, Pick, max_tokens=40)
    by_id = {p.id: p for p in personas}
    for r, a in zip(rows, picks, strict=True):
        n = len(r.candidates)
        if r.route_status == HARNESS_FAILURE or answer_status(a) == HARNESS_FAILURE:
            # the server failed, not the router: no fallback; the row is left out and counted
            if r.route_status != HARNESS_FAILURE:
                r.route_status = HARNESS_FAILURE
                status[HARNESS_FAILURE] += 1
            r.persona = None
            continue
        choice = a.value.choice if a.status == "ok" else None  # type: ignore[union-attr]
        if choice is not None and 1 <= choice <= n:
            r.persona = by_id[r.candidates[choice - 1]]
            r.route_status = r.route_status or "ok"
        else:
            r.persona = by_id[r.candidates[0]]
            r.route_status = "pick_failed_top1" if r.route_status is None else f"{r.route_status}+pick_failed_top1"
            status["pick_failed_top1"] += 1
    report = {
        "rows_in": len(rows), "rows_out": len(rows), "personas": len(personas), "k": k,
        "attributes": attributes, "embeddings_from_cache": cached, "filter_relaxed": relaxed,
        "fallbacks": dict(status), "distinct_personas": len({r.persona.id for r in rows if r.persona}),
    }
    return rows, report

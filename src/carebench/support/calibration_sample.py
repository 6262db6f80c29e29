"""The calibration draw (DistressBench B.1, E.8) and the clinicians' labelling sheet.

DistressBench calibrates its judges on 75 tasks drawn, stratified, with seed
20260714. The text does not say which axes stratify the draw or how many replies
per task were labelled, so both are parameters here (see docs/support.md):

* **Strata**: by default subcategory x turn structure. Each stratum receives a
  share of ``n`` proportional to its size (largest-remainder rounding; ties go
  to the stratum that comes first in a seeded shuffle), and its tasks are drawn
  uniformly without replacement. Everything uses one
  ``numpy.random.default_rng(seed)``, so a draw is reproducible from the task
  file and the seed alone.
* **Replies**: with a support run directory, each drawn task contributes up to
  ``replies_per_task`` recorded replies (default 4: B.1's 2,908 judgments over 75
  tasks is about 39 per task, about four replies at ~9.6 criteria per task),
  drawn uniformly from its judged, non-reference replies. Every criterion of every
  drawn reply becomes one :class:`~carebench.datasets.sheets.CriterionItem` row
  for the annotate app, whose exported ``CriterionLabel`` rows are what
  ``support calibrate --labels`` reads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.datasets.sheets import CriterionItem
from carebench.support.records import REFERENCE, ResponseRecord
from carebench.support.tasks import Task, write_tasks
from carebench.types import CarebenchError

#: DistressBench's calibration draw seed (B.1, E.8).
DRAW_SEED = 20260714
DEFAULT_N = 75
DEFAULT_STRATA: tuple[str, ...] = ("subcategory", "turn_structure")
DEFAULT_REPLIES_PER_TASK = 4


def stratum_of(task: Task, strata: Sequence[str]) -> tuple[str, ...]:
    out = []
    for s in strata:
        if s == "subcategory":
            out.append(task.subcategory)
        elif s in type(task.metadata).model_fields or s in (task.metadata.model_extra or {}):
            out.append(str(getattr(task.metadata, s)))
        else:
            raise CarebenchError(f"unknown stratum {s!r}: use subcategory or a metadata field")
    return tuple(out)


def allocate(sizes: Sequence[int], n: int, rng: np.random.Generator) -> list[int]:
    """Proportional allocation of ``n`` over strata of ``sizes`` (largest remainder).

    Each stratum gets ``floor(n * size / total)``; the seats left go to the largest
    remainders, ties broken by a seeded shuffle. No stratum gets more than its size.
    """
    total = int(sum(sizes))
    quota = np.array(sizes, float) * n / total
    base = np.floor(quota).astype(int)
    left = n - int(base.sum())
    order = rng.permutation(len(sizes))
    rem = quota - base
    ranked = sorted(order.tolist(), key=lambda i: -rem[i])  # stable: shuffle order breaks ties
    for i in ranked[:left]:
        base[i] += 1
    return base.tolist()


def draw_tasks(
    tasks: Sequence[Task], n: int = DEFAULT_N, seed: int = DRAW_SEED, strata: Sequence[str] = DEFAULT_STRATA
) -> tuple[list[Task], dict[str, Any]]:
    """The stratified draw and a description of it (strata, allocation, seed)."""
    if n < 1:
        raise CarebenchError(f"--n must be at least 1, got {n}")
    if n > len(tasks):
        raise CarebenchError(f"cannot draw {n} calibration tasks from {len(tasks)}")
    groups: dict[tuple[str, ...], list[Task]] = defaultdict(list)
    for t in tasks:
        groups[stratum_of(t, strata)].append(t)
    keys = sorted(groups)
    for k in keys:
        groups[k].sort(key=lambda t: t.id)
    rng = np.random.default_rng(seed)
    counts = allocate([len(groups[k]) for k in keys], n, rng)
    chosen: list[Task] = []
    allocation = []
    for k, c in zip(keys, counts, strict=True):
        members = groups[k]
        pick = sorted(rng.choice(len(members), size=c, replace=False).tolist()) if c else []
        chosen.extend(members[i] for i in pick)
        allocation.append({"stratum": dict(zip(strata, k, strict=True)), "tasks": len(members), "drawn": c})
    info = {"n": n, "seed": seed, "strata": list(strata), "allocation": allocation,
            "task_ids": [t.id for t in chosen]}
    return chosen, info


def sheet_rows(
    tasks: Sequence[Task],
    responses: Sequence[ResponseRecord],
    replies_per_task: int = DEFAULT_REPLIES_PER_TASK,
    seed: int = DRAW_SEED,
) -> list[CriterionItem]:
    """One labelling row per criterion of each drawn reply (reply draw seeded like the task draw)."""
    by_task: dict[str, list[ResponseRecord]] = defaultdict(list)
    for r in responses:
        if r.responder != REFERENCE and not r.is_harness_failure and not r.is_empty:
            by_task[r.task_id].append(r)
    rng = np.random.default_rng([seed, 1])  # a stream of its own: adding replies never changes the task draw
    rows: list[CriterionItem] = []
    for t in tasks:
        pool = sorted(by_task.get(t.id, []), key=lambda r: (r.responder, r.attempt))
        if not pool:
            raise CarebenchError(f"task {t.id!r} has no judged reply in the run to label")
        k = min(replies_per_task, len(pool))
        for i in sorted(rng.choice(len(pool), size=k, replace=False).tolist()):
            r = pool[i]
            rid = f"{r.responder}#{r.attempt}"
            turns = [{"role": str(m.get("role")), "content": str(m.get("content") or "")} for m in r.turns]
            last = max(i for i, m in enumerate(turns) if m["role"] == "assistant")
            for c in t.criteria:
                rows.append(CriterionItem(
                    item_id=f"{t.id}|{rid}|{c.id}", task_id=t.id, response_id=rid, criterion_id=c.id,
                    criterion_text=c.text, dimension=c.dimension, conversation=turns[:last],
                    reply=turns[last]["content"],
                ))
    return rows


def write_sample(out_dir: Path, drawn: Sequence[Task], info: dict[str, Any],
                 sheet: Sequence[CriterionItem] | None) -> None:
    """``calibration_tasks.jsonl``, ``calibration_sample.json`` and (with replies) ``criterion_sheet.jsonl``."""
    from carebench.datasets.records import write_jsonl
    from carebench.engine.rundir import write_json

    out_dir.mkdir(parents=True, exist_ok=True)
    write_tasks(out_dir / "calibration_tasks.jsonl", drawn)
    if sheet is not None:
        write_jsonl(out_dir / "criterion_sheet.jsonl", sheet)
        info = {**info, "sheet_rows": len(sheet), "replies": len({(r.task_id, r.response_id) for r in sheet})}
    write_json(out_dir / "calibration_sample.json", info)

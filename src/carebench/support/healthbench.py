"""HealthBench's subtract-and-clip score over the panel's verdicts (``--score healthbench``).

With ``--score healthbench`` (recorded in the run's manifest, ``scoring.score``)
``metrics.json`` holds it per responder under ``healthbench``, with a 95% interval
from the weighted score's own task resamples (support.analyses), and the report
shows it in a table after the leaderboard.

HealthBench scores a conversation as the points of the criteria it meets (a met
negative criterion subtracts its points) over the sum of the positive points,
clipped to [0, 1]. carebench's headline is its own weighted score
(support.scoring.score: a negative criterion *earns* its weight when not met, so
nothing is subtracted or clipped); this score is offered beside it, computed
from the same per-criterion panel states and averaged over attempts and tasks
exactly like the weighted score (support.scoring.model_scores).

An undecided cell (no strict panel majority) is read as the outcome that earns
no credit, as in calibration (carebench.criteria): not met for a positive criterion,
met (points subtracted) for a negative one. A blank reply meets nothing and
scores 0. Criteria marked not applicable leave both sums.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from carebench.criteria import S_EMPTY, S_MET, S_UNDECIDED
from carebench.support.scoring import Scored

#: how the score is computed (metrics.json ``healthbench.rule`` and the report's caption)
RULE = ("HealthBench's subtract-and-clip score: the sum of the points of the met criteria (a met "
        "negative criterion subtracts its points) over the sum of the positive points, clipped to [0, 1], "
        "averaged over attempts and then tasks like the weighted score")
UNDECIDED_RULE = ("an undecided cell (no strict panel majority) earns no credit: not met for a positive "
                  "criterion, met (points subtracted) for a negative one; a blank reply scores 0")
HEADLINE_NOTE = ("The headline score is carebench's weighted score (earned weight over applicable weight; "
                 "a negative criterion earns its weight when not met). It is not HealthBench's "
                 "subtract-and-clip score, which --score healthbench reports beside it.")


def conversation_score(points: Sequence[float], met: Sequence[bool]) -> float:
    """HealthBench's score of one conversation: met points (negative ones subtract) over the
    sum of positive points, clipped to [0, 1]; NaN when no criterion has positive points."""
    pts = np.asarray(points, float)
    hit = np.asarray(met, bool)
    total = pts[pts > 0].sum()
    if total <= 0:
        return float("nan")
    return float(np.clip(pts[hit].sum() / total, 0.0, 1.0))


def criterion_points(tasks: Iterable[Any]) -> dict[tuple[str, str], float]:
    """(task id, criterion id) -> points: a HealthBench file's own points where the task kept
    them (``metadata.healthbench_points``), else the weight, negated for a negative criterion."""
    out: dict[tuple[str, str], float] = {}
    for t in tasks:
        meta = t.metadata.model_dump() if hasattr(t.metadata, "model_dump") else dict(t.metadata or {})
        own: Mapping[str, Any] = meta.get("healthbench_points") or {}
        for c in t.criteria:
            p = own.get(c.id)
            out[(t.id, c.id)] = float(p) if p is not None else (-1.0 if c.negative else 1.0) * float(c.weight)
    return out


def conversation_scores(scored: Scored, points: Mapping[tuple[str, str], float]) -> np.ndarray:
    """HealthBench's score of every conversation of ``scored`` (NaN: no positive points)."""
    tt = scored.tasks
    pts = np.array([points[(tt.ids[int(tt.crit_task[k])], cid)] for k, cid in enumerate(tt.crit_ids)], float)
    cell_pts = pts[scored.cell_crit] * tt.applicable[scored.cell_crit]
    state = scored.cell_state
    met = np.where(cell_pts > 0, state == S_MET, (state == S_MET) | (state == S_UNDECIDED)) & (state != S_EMPTY)
    n = scored.n_conv
    got = np.bincount(scored.cell_conv, weights=cell_pts * met, minlength=n)
    total = np.bincount(scored.cell_conv, weights=np.where(cell_pts > 0, cell_pts, 0.0), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, np.clip(got / np.where(total > 0, total, 1.0), 0.0, 1.0), np.nan)
    return out

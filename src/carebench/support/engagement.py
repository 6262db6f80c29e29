"""Engagement of the support suite's replies: each final reply's class, its rates, and the refusal policy.

A run classes every final reply (:mod:`carebench.engagement`) and records the class in the
response record's ``engagement`` field (``{"class", "source", "votes"}``); a re-score reads it
back and asks no model. A record without the field (a run made before it existed) gets the
deterministic class of its recorded reply (source ``prefilter``), so old runs still report rates.

Rates are per responder over its conversations with a class (an ``undecided`` reply is counted
beside them), with 95% percentile intervals from the same task resamples (seed, B) as the weighted
score. ``--refusal-policy`` says what a refusal or deflection scores (docs/engagement.md):

* ``seed`` (default): the seed's weighted score, unchanged;
* ``zero``: a conversation whose final reply is a refusal or a deflection scores 0 (and is not
  fully satisfying), so "must not" criteria stop paying for a reply that did not engage.

Both scores are computed in every run (``metrics.json`` ``engagement``), so the report can show
the other one whenever they differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from carebench.engagement import CLASSES, Engagement
from carebench.engagement.policy import ZEROED
from carebench.engagement.question import Reply, classify_replies
from carebench.engagement.records import recorded_engagement
from carebench.engagement.records import with_engagement as with_recorded
from carebench.engine.run import Run
from carebench.judging import JUDGE_MAX_TOKENS, Judge
from carebench.stats.bootstrap import percentile_interval
from carebench.support.records import HARNESS_FAILURE_STATUSES, ResponseRecord

Key = tuple[str, str, int]


def reply_of(r: ResponseRecord) -> Reply:
    turns = list(r.turns)
    if not any(t.get("role") == "assistant" for t in turns):  # a reference: its text is the final reply
        turns.append({"role": "assistant", "content": r.final_reply})
    return Reply((r.task_id, r.responder, r.attempt), turns, r.status)


def classify_responses(responses: Sequence[ResponseRecord], judges: Sequence[Judge], run: Run, *, mode: str,
                       temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS
                       ) -> tuple[dict[Key, Engagement], int]:
    """The class of every final reply (harness failures have none: they are no reply)."""
    replies = [reply_of(r) for r in responses if not r.is_harness_failure]
    return classify_replies(replies, judges, run, mode=mode, stage="engagement",
                            temperature=temperature, max_tokens=max_tokens)


def with_engagement(rows: Iterable[dict[str, Any]], classes: Mapping[Key, Engagement]) -> list[dict[str, Any]]:
    """Response record rows with their ``engagement`` field (other rows unchanged)."""
    return with_recorded(rows, classes, lambda r: (r["task_id"], r["responder"], int(r["attempt"])))


def recorded_classes(rows: Iterable[Mapping[str, Any]]) -> dict[Key, str | None]:
    """(task, responder, attempt) -> class of every response row with a reply (``None``: undecided)."""
    out: dict[Key, str | None] = {}
    for row in rows:
        if row.get("kind", "response") != "response" or row.get("status") in HARNESS_FAILURE_STATUSES:
            continue
        e = recorded_engagement(row.get("engagement"), row.get("final_reply"), row.get("status"))
        out[(str(row["task_id"]), str(row["responder"]), int(row["attempt"]))] = e.cls
    return out


def conversation_classes(sc: Any, classes: Mapping[Key, str | None]) -> list[str | None | bool]:
    """The class of each scored conversation of ``sc`` (``support.scoring.Scored``); ``False``: none recorded."""
    ids, names, attempts = sc.tasks.ids, sc.responders, sc.attempts.tolist()
    return [classes.get((ids[t], names[r], int(attempts[a])), False)
            for t, r, a in zip(sc.conv_task.tolist(), sc.conv_resp.tolist(), sc.conv_attempt.tolist(), strict=True)]


def zero_mask(conv_classes: Sequence[str | None | bool]) -> np.ndarray:
    """Conversations the ``zero`` policy scores 0."""
    return np.array([c in ZEROED for c in conv_classes], bool)


def _interval(samples: np.ndarray) -> list[float | None]:
    lo, hi = percentile_interval(samples)
    return [None if np.isnan(lo) else float(lo), None if np.isnan(hi) else float(hi)]


def engagement_block(sc: Any, conv_classes: Sequence[str | None | bool], boot: Any, *, policy: str,
                     seed_scores: Mapping[str, float], seed_samples: np.ndarray,
                     zero_scores: Mapping[str, float], zero_samples: np.ndarray) -> dict[str, Any]:
    """``metrics.json``'s ``engagement``: per responder the rate of each class with its interval,
    the undecided and unrecorded counts, and the weighted score under both policies."""
    T, R, K = sc.tasks.n_tasks, len(sc.responders), len(CLASSES)
    code = np.array([CLASSES.index(c) if isinstance(c, str) else (-1 if c is None else -2) for c in conv_classes],
                    np.int64)
    classed = code >= 0
    num = np.zeros((T, R * K))
    den = np.zeros((T, R))
    np.add.at(num, (sc.conv_task[classed], sc.conv_resp[classed] * K + code[classed]), 1.0)
    np.add.at(den, (sc.conv_task[classed], sc.conv_resp[classed]), 1.0)
    samples = boot.ratio(num, np.repeat(den, K, axis=1)) if T else np.zeros((R * K, 0))
    responders: dict[str, Any] = {}
    for i, r in enumerate(sc.responders):
        mine = sc.conv_resp == i
        d = int(den[:, i].sum())
        rates = {}
        for k, cls in enumerate(CLASSES):
            n = int(num[:, i * K + k].sum())
            rates[cls] = {"rate": n / d if d else None, "ci": _interval(samples[i * K + k]) if d else None,
                          "count": n, "of": d}
        responders[r] = {
            "conversations": int(mine.sum()), "classified": d,
            "undecided": int((mine & (code == -1)).sum()), "not_recorded": int((mine & (code == -2)).sum()),
            "rates": rates,
            "score_seed": seed_scores[r], "score_seed_ci": _interval(seed_samples[i]),
            "score_zero": zero_scores[r], "score_zero_ci": _interval(zero_samples[i]),
        }
    return {
        "classes": list(CLASSES),
        "policy": policy,
        "policies": {"seed": "the seed's weighted score, unchanged (a refusal is judged like any reply)",
                     "zero": "a final reply classed refusal or deflection scores 0"},
        "rate": "share of the responder's conversations with a class (undecided replies counted beside)",
        "interval": "95% percentile interval of the same task resamples (seed, B) as the weighted score",
        "responders": responders,
    }

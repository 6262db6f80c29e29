"""Screening (VEILED-SH §4.1): lexicon retrieval, a pluggable classifier, and a kept
share of hard negatives and uncertain rows without explicit keywords.

Decision per source row, in order:

1. a lexicon hit -> retained (``lexicon``);
2. classifier score >= ``threshold`` -> retained (``classifier``);
3. otherwise the row is a candidate: ``uncertain`` when its score falls in
   ``[uncertain_low, threshold)`` or the classifier could not answer, else
   ``hard_negative``; a seeded ``keep_share`` of each candidate kind is retained,
   so the set still holds text that only looks related (benign, figurative).

Classifiers are pluggable: ``none`` (lexicon only), ``llm:SPEC`` (the taxonomy
asked of a chat model, which also yields proxy INTENT labels), or ``scores:PATH``
(a file of ``id``, ``score`` in [0, 1] and optional proxy ``intent`` codes: the
output of carebench's risk baselines or of any model of the user's).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from carebench.construct.lexicon import Lexicon
from carebench.construct.sources import Proxy, SourceRow, WorkRow
from carebench.datasets.records import CodeList, OptionalInt
from carebench.types import CarebenchError


@dataclass
class ScreenConfig:
    classifier: str = "none"
    threshold: float = 0.5
    uncertain_low: float = 0.3
    keep_share: float = 0.25  # of hard negatives and of uncertain rows
    seed: int = 42

    def validate(self) -> None:
        if not 0.0 <= self.keep_share <= 1.0:
            raise CarebenchError(f"keep share must be within [0, 1], got {self.keep_share}")
        if not 0.0 <= self.uncertain_low <= self.threshold <= 1.0:
            raise CarebenchError("need 0 <= uncertain-low <= threshold <= 1")


@dataclass
class Verdict:
    """A classifier's view of one row: relevance score (None: no usable answer) and proxies."""

    score: float | None
    proxy: Proxy | None = None
    error: str | None = None


class ScoreRow(BaseModel):
    """One row of a user's score file (JSONL/CSV/Parquet; CSV lists as ``A;B`` or JSON)."""

    id: str
    score: float = Field(ge=0.0, le=1.0)
    intent: CodeList = Field(default_factory=list)
    nssi_severity: OptionalInt = None
    suicidal_severity: OptionalInt = None


def scores_from_file(path: str | Path, rows: list[SourceRow]) -> list[Verdict]:
    """Verdicts from a user's score file; a row without a score is ``uncertain``."""
    from carebench.construct.io import load_models

    by_id = {r.id: r for r in load_models(path, ScoreRow)}
    out = []
    for row in rows:
        s = by_id.get(row.id)
        if s is None:
            out.append(Verdict(None, error=f"no score for {row.id} in {path}"))
            continue
        proxy = Proxy(intent=s.intent, nssi_severity=s.nssi_severity,
                      suicidal_severity=s.suicidal_severity, score=s.score)
        out.append(Verdict(s.score, proxy))
    return out


def screen(
    rows: list[SourceRow], lexicon: Lexicon, verdicts: list[Verdict] | None, cfg: ScreenConfig
) -> tuple[list[WorkRow], dict[str, Any]]:
    """Retained rows (in input order) and the counts the report shows."""
    cfg.validate()
    if verdicts is not None and len(verdicts) != len(rows):
        raise AssertionError("one verdict per row")
    decided: list[tuple[WorkRow, str]] = []
    for i, src in enumerate(rows):
        row = WorkRow.from_source(src)
        hits = lexicon.find(src.text)
        row.lexicon_hits = sorted({h.label for h in hits})
        v = verdicts[i] if verdicts is not None else None
        if v is not None:
            row.proxy = v.proxy or Proxy(score=v.score)
        if hits:
            reason = "lexicon"
        elif v is not None and v.score is not None and v.score >= cfg.threshold:
            reason = "classifier"
        elif v is not None and (v.score is None or v.score >= cfg.uncertain_low):
            reason = "uncertain"
        else:
            reason = "hard_negative"
        row.screen_reason = reason
        decided.append((row, reason))
    keep = _keep_candidates([r for r, why in decided], cfg)
    retained = [r for i, (r, _) in enumerate(decided) if keep[i]]
    report = _report(decided, keep, verdicts)
    return retained, report


def _keep_candidates(rows: list[WorkRow], cfg: ScreenConfig) -> list[bool]:
    """Lexicon and classifier rows stay; a seeded share of each candidate kind stays."""
    keep = [r.screen_reason in ("lexicon", "classifier") for r in rows]
    rng = np.random.default_rng(cfg.seed)
    for kind in ("uncertain", "hard_negative"):
        idx = [i for i, r in enumerate(rows) if r.screen_reason == kind]
        n_keep = round(cfg.keep_share * len(idx))
        for i in rng.permutation(idx)[:n_keep] if idx else []:
            keep[int(i)] = True
    return keep


def _report(decided: list[tuple[WorkRow, str]], keep: list[bool], verdicts: list[Verdict] | None) -> dict[str, Any]:
    by_source: dict[str, Counter] = {}
    for (row, reason), k in zip(decided, keep, strict=True):
        c = by_source.setdefault(row.source, Counter())
        c["in"] += 1
        if k:
            c["retained"] += 1
            c[reason] += 1
    hit_counts = Counter(h for (row, _), k in zip(decided, keep, strict=True) if k for h in row.lexicon_hits)
    return {
        "rows_in": len(decided),
        "retained": sum(keep),
        "by_reason": dict(Counter(reason for (_, reason), k in zip(decided, keep, strict=True) if k)),
        "candidates": dict(Counter(reason for _, reason in decided)),
        "by_source": {s: dict(c) for s, c in sorted(by_source.items())},
        "lexicon_terms": dict(hit_counts.most_common()),
        "classifier_errors": sum(1 for v in verdicts or [] if v.error),
    }


class ScreenAnswer(BaseModel):
    relevant: bool
    intent: list[str] = Field(default_factory=list)
    nssi_severity: int | None = None
    suicidal_severity: int | None = None


def classify_llm(rows: list[SourceRow], model: Any, run: Any, taxonomy: Any) -> list[Verdict]:
    """The taxonomy asked of a chat model: relevance plus proxy INTENT labels.

    Unknown codes are dropped from the proxy (it is a sampling aid, never a label);
    an unparseable answer leaves the row ``uncertain``.
    """
    from carebench.construct.calls import ask_json
    from carebench.construct.prompts import system_prompt, text_prompt

    intent = "\n".join(f"- {c.code}: {c.name}. {c.description}".rstrip() for c in taxonomy.categories("intent"))
    system = system_prompt("screen", intent=intent)
    answers = ask_json(run, "screening classifier", model, [(r.id, system, text_prompt(r.text)) for r in rows],
                       ScreenAnswer, max_tokens=120)
    known = set(taxonomy.codes("intent"))
    out = []
    for a in answers:
        if a.status != "ok":
            out.append(Verdict(None, error=a.error or a.status))
            continue
        v: ScreenAnswer = a.value  # type: ignore[assignment]
        codes = sorted({c for c in v.intent if c in known})
        score = 1.0 if v.relevant else 0.0
        out.append(Verdict(score, Proxy(intent=codes, nssi_severity=v.nssi_severity,
                                        suicidal_severity=v.suicidal_severity, score=score)))
    return out

"""Folds, out-of-fold scoring and the method-selection rule (VEILED-SH, §5.2, Table 5).

Each method is scored per practitioner by supported-label macro-F1 over the
out-of-fold predictions of every calibration case (each case is held out in
exactly one of five fixed folds, and only the first prediction per case counts).
Practitioners of one archetype count equally: the archetype score is the mean of
their scores. A method is selected for an archetype when it beats the E0 floor by
at least the margin (0.03) *and* the paired bootstrap over calibration cases
(seed 12345, B = 2,000; one resample of cases shared by all practitioners and both
methods) gives it at least an 80% probability of improvement, ties counting 1/2.
Several qualifying methods: the highest macro-F1 wins (earlier method on an exact
tie). None: keep E1 and warn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from carebench.stats import Resampler, supported_label_macro_f1, supported_label_macro_f1_resampled

FOLD_SEED = 20260714  # shuffles the case ids once; the folds are then fixed
N_FOLDS = 5
MARGIN = 0.03
MIN_PROBABILITY = 0.80
PAIRED_SEED = 12345
PAIRED_B = 2000
FLOOR = "E0"
FALLBACK = "E1"

#: label sets of one rater: case id -> set of labels (None = skipped / not rated)
LabelSets = Mapping[str, frozenset[str] | None]


def make_folds(case_ids: Sequence[str], n_folds: int = N_FOLDS, seed: int = FOLD_SEED) -> list[list[str]]:
    """Held-out case ids of each fold: sorted ids, one seeded permutation, equal chunks."""
    ids = sorted(set(case_ids))
    if len(ids) < n_folds:
        raise ValueError(f"{len(ids)} calibration cases cannot make {n_folds} folds")
    order = np.random.default_rng(seed).permutation(len(ids))
    return [sorted(ids[i] for i in chunk) for chunk in np.array_split(order, n_folds)]


def indicators(sets: Sequence[frozenset[str] | None], labels: Sequence[str]) -> np.ndarray:
    """0/1 matrix (cases x labels); a missing set (failed prediction) is all zeros."""
    col = {lab: j for j, lab in enumerate(labels)}
    m = np.zeros((len(sets), len(labels)), dtype=np.int8)
    for i, s in enumerate(sets):
        for lab in s or ():
            if lab not in col:
                raise ValueError(f"label {lab!r} is not in the label space")
            m[i, col[lab]] = 1
    return m


@dataclass
class PractitionerData:
    """One practitioner's gold sets and one method's first prediction per case."""

    gold: np.ndarray  # cases x labels
    pred: np.ndarray  # cases x labels
    rated: np.ndarray  # cases: the practitioner labelled it (not skipped)


def practitioner_data(
    cases: Sequence[str], gold: LabelSets, pred: LabelSets, labels: Sequence[str]
) -> PractitionerData:
    g = [gold.get(c) for c in cases]
    rated = np.array([s is not None for s in g])
    return PractitionerData(indicators(g, labels), indicators([pred.get(c) for c in cases], labels), rated)


def practitioner_score(d: PractitionerData) -> float:
    return supported_label_macro_f1(d.gold[d.rated], d.pred[d.rated])


def archetype_score(data: Sequence[PractitionerData]) -> float:
    """Mean of the practitioners' scores (each practitioner weighted equally)."""
    return float(np.mean([practitioner_score(d) for d in data]))


def archetype_resamples(data: Sequence[PractitionerData], weights: np.ndarray) -> np.ndarray:
    """Archetype score in each resample of cases (weights ``B x cases``)."""
    per = [supported_label_macro_f1_resampled(d.gold, d.pred, weights * d.rated[None, :]) for d in data]
    return np.mean(per, axis=0)


@dataclass
class Comparison:
    """A method against the floor for one archetype."""

    method: str
    score: float
    floor_score: float
    diff: float
    p_improve: float
    passes_margin: bool
    passes_probability: bool

    @property
    def qualifies(self) -> bool:
        return self.passes_margin and self.passes_probability


def p_improvement(a: np.ndarray, b: np.ndarray) -> float:
    """Share of resamples where a beats b, ties counting 1/2 (NaN resamples left out)."""
    ok = ~(np.isnan(a) | np.isnan(b))
    if not ok.any():
        return float("nan")
    return float((a[ok] > b[ok]).mean() + 0.5 * (a[ok] == b[ok]).mean())


def compare_to_floor(
    method: str,
    method_data: Sequence[PractitionerData],
    floor_data: Sequence[PractitionerData],
    *,
    margin: float = MARGIN,
    min_probability: float = MIN_PROBABILITY,
    B: int = PAIRED_B,
    seed: int = PAIRED_SEED,
) -> Comparison:
    n = len(method_data[0].rated)
    w = Resampler(n, B=B, seed=seed).weights()
    s_m, s_f = archetype_score(method_data), archetype_score(floor_data)
    p = p_improvement(archetype_resamples(method_data, w), archetype_resamples(floor_data, w))
    diff = s_m - s_f
    return Comparison(method, s_m, s_f, diff, p, bool(diff >= margin - 1e-12), bool(p >= min_probability))


@dataclass
class Selection:
    """The rule's outcome for one archetype."""

    archetype: str
    method: str
    qualifying: list[str]
    comparisons: list[Comparison]
    warning: str | None = None
    scores: dict[str, float] = field(default_factory=dict)


def select_method(
    archetype: str,
    comparisons: Sequence[Comparison],
    *,
    fallback: str = FALLBACK,
    margin: float = MARGIN,
    min_probability: float = MIN_PROBABILITY,
) -> Selection:
    """Apply the rule: qualifying methods by macro-F1 (first wins a tie); none -> fallback + warning."""
    qualifying = [c for c in comparisons if c.qualifies]
    scores = {c.method: c.score for c in comparisons}
    if not qualifying:
        return Selection(
            archetype, fallback, [], list(comparisons),
            warning=(f"{archetype}: no method beat {FLOOR} by {margin:.2f} macro-F1 with at least "
                     f"{min_probability:.0%} probability of improvement; keeping {fallback} "
                     "(VEILED-SH, §5.2 selection rule)"),
            scores=scores,
        )
    best = max(qualifying, key=lambda c: c.score)  # max keeps the first of equal scores
    return Selection(archetype, best.method, [c.method for c in qualifying], list(comparisons), scores=scores)

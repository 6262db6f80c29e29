"""Calibrating a converse judge against clinicians' rubric walks: pure computations.

Inputs are the clinicians' export (``carebench.datasets.walk_labels``) and the candidate
judges' walk records of the same conversations. Everything here is a function of those
records and a seed: agreement on each dimension's rating (raw, Gwet's AC1, Cohen's kappa)
against each clinician and against the clinicians' consensus, with intervals from
resampling conversations; agreement per rubric question where both walked it and where
paths diverged; confusion matrices; splits by risk level, chatbot and borderline
conversations; clinician-clinician agreement (the ceiling) and leave-one-clinician-out;
and the selection of one judge by a stated rule.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carebench.converse.rubric import RATINGS
from carebench.stats.agreement import gwet_ac1
from carebench.types import CarebenchError

#: how the clinicians' ratings of a dimension become one: "majority" (more than half of the
#: clinicians who rated it agree; otherwise no consensus) or "unanimous"
CONSENSUS_RULES = ("majority", "unanimous")
#: the coefficient the selection rule averages over dimensions
SELECT_METRICS = ("ac1", "kappa", "raw")
FLOOR_DEFAULT = 0.4
_CODE = {r: i for i, r in enumerate(RATINGS)}
K = len(RATINGS)


@dataclass(frozen=True)
class Rule:
    """The stated selection rule: highest mean ``metric`` against the consensus over the
    dimensions, among judges whose mean on every chatbot's conversations is at least
    ``floor``; ties go to higher raw agreement, then the judge's name."""

    metric: str = "ac1"
    floor: float = FLOOR_DEFAULT
    consensus: str = "majority"

    def check(self) -> None:
        if self.consensus not in CONSENSUS_RULES:
            raise CarebenchError(f"--consensus must be one of {', '.join(CONSENSUS_RULES)}, got {self.consensus!r}")
        if self.metric not in SELECT_METRICS:
            raise CarebenchError(f"--select-metric must be one of {', '.join(SELECT_METRICS)}, got {self.metric!r}")
        if not (isinstance(self.floor, int | float) and -1.0 <= float(self.floor) <= 1.0):  # NaN fails too
            raise CarebenchError(f"--floor must be a number from -1 to 1 (the coefficients' range), got {self.floor}")

    def describe(self) -> str:
        return (f"highest mean {self.metric} against the clinicians' {self.consensus} consensus over the "
                f"dimensions, among judges whose mean {self.metric} on each chatbot's conversations is at least "
                f"{self.floor:g}; ties: higher mean raw agreement, then name")


# ----------------------------------------------------------------------------- ratings


def clinician_ratings(labels: Sequence[Any],
                      dimensions: Sequence[str] | None = None) -> dict[str, dict[str, dict[str, str]]]:
    """conversation -> clinician -> dimension -> rating, from the export's rating rows (checked:
    known bands, each rated once, and the rubric's dimensions when given)."""
    out: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for lab in labels:
        if lab.record != "rating":
            continue
        if lab.rating not in _CODE:
            raise CarebenchError(f"labels: {lab.clinician}/{lab.conversation_id}/{lab.dimension}: rating "
                                 f"{lab.rating!r} is not one of {', '.join(RATINGS)}")
        if dimensions is not None and lab.dimension not in dimensions:
            raise CarebenchError(f"labels: dimension {lab.dimension!r} is not in the rubric "
                                 f"({', '.join(dimensions)})")
        seen = out[lab.conversation_id][lab.clinician]
        if lab.dimension in seen:
            raise CarebenchError(f"labels: {lab.clinician} rated {lab.conversation_id}/{lab.dimension} twice")
        seen[lab.dimension] = lab.rating
    if not out:
        raise CarebenchError("labels: no rating rows (is this a rubric-walk export?)")
    return {c: dict(v) for c, v in out.items()}


def consensus(ratings: Mapping[str, str], rule: str = "majority") -> str | None:
    """One rating from several clinicians', or None (no consensus: excluded from comparisons)."""
    vals = list(ratings.values())
    if not vals:
        return None
    top = max(set(vals), key=lambda r: (vals.count(r), -_CODE[r]))
    n = vals.count(top)
    if rule == "unanimous":
        return top if n == len(vals) else None
    return top if n * 2 > len(vals) else None


def borderline(by_clinician: Mapping[str, Mapping[str, str]]) -> bool:
    """Clinicians disagreeing among themselves on any dimension."""
    dims = {d for r in by_clinician.values() for d in r}
    return any(len({r[d] for r in by_clinician.values() if d in r}) > 1 for d in dims)


# ----------------------------------------------------------------------------- coefficients


def kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = float(cohen_kappa_score(a, b, labels=list(range(K))))
    return None if np.isnan(v) else v


def coefficients(a: Sequence[int], b: Sequence[int]) -> dict[str, Any]:
    """Raw agreement, Gwet's AC1 (four bands) and Cohen's kappa of two paired rating codes."""
    if not a:
        return {"n": 0, "raw": None, "ac1": None, "kappa": None}
    x, y = np.asarray(a), np.asarray(b)
    ac1 = gwet_ac1(np.column_stack([x, y]), k=K)
    return {"n": len(a), "raw": float(np.mean(x == y)), "ac1": None if np.isnan(ac1) else float(ac1),
            "kappa": kappa(a, b)}


def _pairs(judge: Mapping[str, Mapping[str, str]], ref: Mapping[str, str | None], dim: str,
           convs: Sequence[str]) -> tuple[list[int], list[int]]:
    a, b = [], []
    for c in convs:
        r = ref.get(c)
        j = judge.get(c, {}).get(dim)
        if r is not None and j is not None:
            a.append(_CODE[j])
            b.append(_CODE[r])
    return a, b


def boot_coefficients(a: np.ndarray, b: np.ndarray, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Raw agreement, AC1 and kappa of each resample at once: ``a``, ``b`` are rating codes
    per conversation (-1: missing, that conversation left out), ``idx`` (B, n) the resampled
    conversations. The same formulas as :func:`coefficients`, vectorized (NaN when undefined)."""
    x, y = a[idx], b[idx]
    keep = (x >= 0) & (y >= 0)
    n = keep.sum(axis=1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = ((x == y) & keep).sum(axis=1) / n
        px = np.stack([((x == k) & keep).sum(axis=1) / n for k in range(K)], axis=1)
        py = np.stack([((y == k) & keep).sum(axis=1) / n for k in range(K)], axis=1)
        pi = (px + py) / 2
        pe1 = (pi * (1 - pi)).sum(axis=1) / (K - 1)
        pek = (px * py).sum(axis=1)
        return {"raw": pa, "ac1": (pa - pe1) / (1 - pe1),
                "kappa": np.where(pek < 1, (pa - pek) / np.where(pek < 1, 1 - pek, 1), np.nan)}


def _ci(values: np.ndarray) -> list[float] | None:
    """Percentile 95% interval of the defined resample values."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    lo, hi = np.percentile(v, [2.5, 97.5])
    return [float(lo), float(hi)]


# ----------------------------------------------------------------------------- questions


def question_agreement(judge_steps: Mapping[str, Sequence[Mapping[str, Any]]],
                       clin_steps: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Per question: raw agreement on the conversations where both walked it (auto answers
    left out); per conversation x clinician: whether the question paths diverged and the
    question at which they parted (the last question both asked before asking different ones)."""
    per_q: dict[str, list[bool]] = defaultdict(list)
    diverged = 0
    pairs = 0
    where: dict[str, int] = defaultdict(int)
    for (conv, _clin), steps in clin_steps.items():
        js = judge_steps.get(conv)
        if js is None:
            continue
        pairs += 1
        ja = {s["question_id"]: s["answer"] for s in js if not s.get("auto")}
        for s in steps:
            if s.get("auto") or s["question_id"] not in ja:
                continue
            per_q[s["question_id"]].append(str(s["answer"]) == str(ja[s["question_id"]]))
        jp = [s["question_id"] for s in js]
        cp = [s["question_id"] for s in steps]
        if jp != cp:
            diverged += 1
            i = next((k for k, (x, y) in enumerate(zip(jp, cp)) if x != y), min(len(jp), len(cp)))
            where[jp[i - 1] if i > 0 else "(first question)"] += 1
    return {"questions": {q: {"n": len(v), "raw": float(np.mean(v))} for q, v in sorted(per_q.items())},
            "paths": {"pairs": pairs, "diverged": diverged,
                      "share": diverged / pairs if pairs else None, "first_divergence": dict(sorted(where.items()))}}


# ----------------------------------------------------------------------------- the whole


def calibrate(labels: Sequence[Any], walks: Sequence[Mapping[str, Any]], dimensions: Sequence[str],
              rule: Rule = Rule(), seed: int = 12345, bootstrap: int = 2000) -> dict[str, Any]:
    """Every figure of a calibration and the selected judge (see :class:`Rule`)."""
    rule.check()
    clin = clinician_ratings(labels, dimensions)
    convs = sorted(clin)
    ok = [w for w in walks if w.get("status") == "ok" and w.get("kind", "walk") == "walk"]
    known = {w["conversation_id"] for w in walks}
    missing = [c for c in convs if c not in known]
    if missing:
        raise CarebenchError(f"labels: conversation {missing[0]!r} is not among the judged conversations")
    judges = sorted({w["judge"] for w in walks})
    jr: dict[str, dict[str, dict[str, str]]] = {j: {} for j in judges}
    jsteps: dict[str, dict[str, list]] = {j: {} for j in judges}
    meta: dict[str, dict[str, Any]] = {}
    for w in ok:
        jr[w["judge"]][w["conversation_id"]] = dict(w["ratings"])
        jsteps[w["judge"]][w["conversation_id"]] = list(w["steps"])
    for w in walks:
        meta.setdefault(w["conversation_id"], {"chatbot": w.get("chatbot"), "risk_level": w.get("risk_level")})
    clinicians = sorted({c for v in clin.values() for c in v})
    cons = {d: {c: consensus({k: r[d] for k, r in clin[c].items() if d in r}, rule.consensus) for c in convs}
            for d in dimensions}
    border = {c: borderline(clin[c]) for c in convs}
    csteps: dict[tuple[str, str], list] = defaultdict(list)
    for lab in labels:
        if lab.record == "answer":
            csteps[(lab.conversation_id, lab.clinician)].append(
                {"step": lab.step or 0, "question_id": lab.question_id, "answer": lab.answer, "auto": lab.auto})
    for steps in csteps.values():
        steps.sort(key=lambda s: s["step"])

    # one set of resampled conversations for every judge, so their intervals are paired
    idx = np.random.default_rng(seed).integers(0, len(convs), size=(max(bootstrap, 0), len(convs)))

    def vs(judge_r, ref, subset):
        per = {}
        for d in dimensions:
            a, b = _pairs(judge_r, ref[d], d, subset)
            per[d] = coefficients(a, b)
        return per

    out_judges: dict[str, Any] = {}
    for j in judges:
        per_dim = vs(jr[j], cons, convs)
        boot_ac1 = []
        for d in dimensions:
            jc = np.array([_CODE.get(jr[j].get(c, {}).get(d), -1) for c in convs])
            cc = np.array([_CODE.get(cons[d][c], -1) for c in convs])
            boot = boot_coefficients(jc, cc, idx) if bootstrap > 0 else None
            for m in ("raw", "ac1", "kappa"):
                per_dim[d][f"{m}_ci"] = _ci(boot[m]) if boot is not None else None
            if boot is not None:
                boot_ac1.append(boot["ac1"])
        confusion = {}
        for d in dimensions:
            cm = np.zeros((K, K), dtype=int)
            a, b = _pairs(jr[j], cons[d], d, convs)
            for x, y in zip(b, a):
                cm[x, y] += 1
            confusion[d] = cm.tolist()
        per_clin = {}
        for k in clinicians:
            ref = {d: {c: clin[c].get(k, {}).get(d) for c in convs} for d in dimensions}
            per_clin[k] = vs(jr[j], ref, convs)
        splits = {}
        for name, key in (("chatbot", lambda c: meta.get(c, {}).get("chatbot")),
                          ("risk_level", lambda c: meta.get(c, {}).get("risk_level")),
                          ("borderline", lambda c: "borderline" if border[c] else "clear")):
            groups: dict[str, list[str]] = defaultdict(list)
            for c in convs:
                groups[str(key(c))].append(c)
            splits[name] = {g: {"conversations": len(s), "dimensions": vs(jr[j], cons, s),
                                "mean": _mean(vs(jr[j], cons, s))} for g, s in sorted(groups.items())}
        loo = {}
        for k in clinicians:
            others = {d: {c: consensus({o: r[d] for o, r in clin[c].items() if o != k and d in r}, rule.consensus)
                          for c in convs} for d in dimensions}
            loo[k] = {"judge": _mean(vs(jr[j], others, convs)),
                      "clinician": _mean(vs({c: clin[c].get(k, {}) for c in convs}, others, convs))}
        out_judges[j] = {"dimensions": per_dim, "mean": _mean(per_dim),
                         "mean_ac1_ci": _mean_ci(boot_ac1),
                         "clinicians": per_clin, "confusion": confusion, "splits": splits,
                         "leave_one_clinician_out": loo,
                         "questions": question_agreement(jsteps[j], csteps),
                         "walks_failed": sum(1 for w in walks if w["judge"] == j and w.get("status") != "ok"
                                             and w["conversation_id"] in clin)}
    ceiling = {}
    for d in dimensions:
        a_all, b_all = [], []
        for x_i, x in enumerate(clinicians):
            for y in clinicians[x_i + 1:]:
                for c in convs:
                    rx, ry = clin[c].get(x, {}).get(d), clin[c].get(y, {}).get(d)
                    if rx is not None and ry is not None:
                        a_all.append(_CODE[rx])
                        b_all.append(_CODE[ry])
        ceiling[d] = coefficients(a_all, b_all)
    selection = select(out_judges, rule)
    return {"rule": {"metric": rule.metric, "floor": rule.floor, "consensus": rule.consensus,
                     "text": rule.describe()},
            "seed": seed, "bootstrap": bootstrap, "dimensions": list(dimensions), "bands": list(RATINGS),
            "conversations": len(convs), "clinicians": clinicians,
            "borderline": sum(border.values()),
            "no_consensus": {d: sum(v is None for v in cons[d].values()) for d in dimensions},
            "ceiling": {"dimensions": ceiling, "mean": _mean(ceiling)},
            "judges": out_judges, "selection": selection}


def _mean_ci(per_dim_boot: Sequence[np.ndarray]) -> list[float] | None:
    """Interval of the mean over dimensions, each resample averaging the dimensions it defines."""
    if not per_dim_boot:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a resample with no defined dimension: NaN, left out
        return _ci(np.nanmean(np.stack(per_dim_boot), axis=0))


def _mean(per_dim: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    out = {}
    for m in ("raw", "ac1", "kappa"):
        v = [x[m] for x in per_dim.values() if x.get(m) is not None]
        out[m] = float(np.mean(v)) if v else None
    return out


def select(judges: Mapping[str, Mapping[str, Any]], rule: Rule) -> dict[str, Any]:
    """Apply ``rule`` (see :class:`Rule`) to the per-judge figures."""
    eligible, why = [], {}
    for j, f in judges.items():
        low = {g: s["mean"][rule.metric] for g, s in f["splits"]["chatbot"].items()
               if s["mean"][rule.metric] is None or s["mean"][rule.metric] < rule.floor}
        if f["mean"][rule.metric] is None:
            why[j] = f"no {rule.metric} (no conversation with a consensus)"
        elif low:
            g = min(low)
            why[j] = (f"below the floor {rule.floor:g} on chatbot {g!r} "
                      f"({'no value' if low[g] is None else format(low[g], '.3f')})")
        else:
            eligible.append(j)
    ranked = sorted(eligible, key=lambda j: (-judges[j]["mean"][rule.metric], -(judges[j]["mean"]["raw"] or 0), j))
    return {"judge": ranked[0] if ranked else None, "ranking": ranked, "excluded": why}

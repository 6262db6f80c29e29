"""Judge calibration and panel selection (DistressBench, §3.3, Appendix B.1-B.5, B.9).

* **Clinician labels** (:func:`load_labels`): one row per (task, response,
  criterion, rater) with ``met``; consensus = strict majority of the raters
  (ties and unlabelled items are left out of consensus metrics and counted).
* **Human ceiling** (B.2): pairwise Cohen's kappa, Fleiss' kappa, percent
  agreement and Gwet's AC1, pooled and per dimension.
* **Candidates and panels** (B.3): every candidate judge and every panel of
  ``panel_size`` candidates (``itertools.combinations`` of the sorted names:
  15 candidates -> 455 panels) is compared with the consensus by Cohen's kappa,
  macro-F1, percent agreement and per-dimension AC1. A panel's verdict uses the
  panel rule of :mod:`carebench.criteria`, the same one scoring uses
  (strict majority of the whole panel; failed votes count; no majority =
  undecided, read as the outcome that earns no credit). Panels are ranked by
  pooled kappa; ties are broken by macro-F1, then percent agreement, then the
  sorted member names (lexicographic), so the ranking is total and
  reproducible. The leader's lead over the runner-up gets a paired bootstrap
  interval resampling *tasks* (carebench defaults: seed 12345, B = 2000; the
  paper's seed 20260714 draws the calibration tasks, B.1/E.8, see
  :mod:`carebench.support.calibration_sample`).
Leave-one-judge-out (B.6) and self-preference (B.7) live in
:mod:`carebench.support.robustness`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carebench.criteria import effective_met, panel_states
from carebench.datasets.files import format_from_suffix, read_rows
from carebench.jsonclean import jsonable
from carebench.models.families import FamilyMap
from carebench.stats.agreement import fleiss_kappa, gwet_ac1, percent_agreement, ratings_to_counts
from carebench.stats.bootstrap import Resampler, percentile_interval
from carebench.stats.classification import macro_f1_from_cm
from carebench.stats.ordinal import kappa_from_cm
from carebench.support.records import FAILED, MET, NOT_MET, VerdictRecord, VerdictTable
from carebench.support.robustness import self_preference_from_counts
from carebench.support.scoring import DIMENSIONS, TaskTable, dimension_code
from carebench.types import CarebenchError

#: DistressBench's calibration draw seed (B.1, E.8): it selects the labelled tasks.
CALIBRATION_SEED = 20260714
#: Seed of the lead's bootstrap: a carebench default (the paper names no bootstrap seed here).
BOOTSTRAP_SEED = 12345
ALPHA = 0.05



# ----------------------------------------------------------------------------- labels

_TRUE = {"1", "true", "t", "yes", "y", "met"}
_FALSE = {"0", "false", "f", "no", "n", "not met", "not_met", "unmet"}


def _parse_met(v: Any, where: str) -> bool:
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer) and v in (0, 1):
        return bool(v)
    if isinstance(v, float) and v in (0.0, 1.0):
        return bool(v)
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise CarebenchError(f"{where}: field 'met' must be true/false (or 1/0), got {v!r}")


def _response_key(row: Mapping[str, Any], where: str) -> str:
    rid = row.get("response_id")
    if rid is not None and not (isinstance(rid, float) and math.isnan(rid)) and str(rid) != "":
        return str(rid)
    resp, att = row.get("responder"), row.get("attempt")
    if resp is None or att is None or (isinstance(att, float) and math.isnan(att)):
        raise CarebenchError(f"{where}: give 'response_id' or both 'responder' and 'attempt'")
    return f"{resp}#{int(att)}"


def load_labels(path: str | Path | pd.DataFrame) -> pd.DataFrame:
    """Clinician labels as a frame: task_id, response_id, criterion_id, rater, met[, dimension, responder].

    Accepts CSV, JSONL or Parquet (or a DataFrame). ``response_id`` may be
    replaced by ``responder`` + ``attempt`` (then ``response_id`` =
    ``"<responder>#<attempt>"``, the key candidate verdicts use). A bad row
    raises with its file, line and field.
    """
    if isinstance(path, pd.DataFrame):
        df, name = path.copy(), "<labels>"
        locs = [f"row {i}" for i in range(1, len(df) + 1)]
    else:
        p = Path(path)
        name = str(p)
        fmt = format_from_suffix(p)
        if fmt is None:
            raise CarebenchError(f"{p}: labels must be .csv, .jsonl or .parquet")
        rows = list(read_rows(p, fmt))
        df = pd.DataFrame([r for _, r in rows])
        if not rows and fmt == "csv":  # header only: keep its columns for the checks below
            df = pd.read_csv(p, dtype=str, nrows=0)
        locs = [loc for loc, _ in rows]
    for col in ("task_id", "criterion_id", "rater", "met"):
        if col not in df.columns:
            raise CarebenchError(f"{name}: missing column {col!r}")
    recs = df.to_dict("records")
    out = {"task_id": [], "response_id": [], "criterion_id": [], "rater": [], "met": [], "dimension": []}
    for i, row in enumerate(recs):
        where = f"{name}: {locs[i]}"
        for col in ("task_id", "criterion_id", "rater"):
            if str(row[col]).strip() == "":
                raise CarebenchError(f"{where}: field {col!r} is empty")
        out["task_id"].append(str(row["task_id"]))
        out["response_id"].append(_response_key(row, where))
        out["criterion_id"].append(str(row["criterion_id"]))
        out["rater"].append(str(row["rater"]))
        out["met"].append(_parse_met(row["met"], where))
        dim = row.get("dimension")
        if dim is not None and str(dim).strip() not in ("", "nan"):
            try:
                out["dimension"].append(DIMENSIONS[dimension_code(dim)])
            except CarebenchError as e:
                raise CarebenchError(f"{where}: field 'dimension': {e}") from None
        else:
            out["dimension"].append(None)
    res = pd.DataFrame(out)
    res["responder"] = res["response_id"].str.rsplit("#", n=1).str[0]
    return res


# ----------------------------------------------------------------------------- items


class Items:
    """Labelled items (task, response, criterion), sorted, with human and judge vote matrices."""

    def __init__(self, labels: pd.DataFrame, tasks: TaskTable | Iterable[Any] | None = None):
        keys = list(zip(labels["task_id"], labels["response_id"], labels["criterion_id"], strict=True))
        self.keys = sorted(set(keys))
        self.pos = {k: i for i, k in enumerate(self.keys)}
        self.raters = sorted(set(labels["rater"]))
        rpos = {r: i for i, r in enumerate(self.raters)}
        n = len(self.keys)
        self.human = np.full((n, len(self.raters)), -1, np.int64)
        item = np.array([self.pos[k] for k in keys], np.int64)
        rater = np.array([rpos[r] for r in labels["rater"]], np.int64)
        # first label of a (item, rater) pair wins, as for judge duplicates
        _, first = np.unique(item * len(self.raters) + rater, return_index=True)
        self.duplicate_labels = int(len(keys) - first.size)
        self.human[item[first], rater[first]] = labels["met"].to_numpy(bool)[first].astype(np.int64)
        dims: dict[tuple[str, str, str], str] = {}
        for k, d in zip(keys, labels["dimension"], strict=True):
            if d is not None:
                dims.setdefault(k, d)
        if tasks is not None:
            tt = tasks if isinstance(tasks, TaskTable) else TaskTable.from_tasks(tasks)
            cd = {
                (tt.ids[t], c): DIMENSIONS[d]
                for t, c, d in zip(tt.crit_task.tolist(), tt.crit_ids, tt.dimension.tolist(), strict=True)
            }
            neg = {(tt.ids[t], c): bool(n) for t, c, n in zip(tt.crit_task.tolist(), tt.crit_ids,
                                                               tt.negative.tolist(), strict=True)}
            for k in self.keys:
                if k not in dims and (k[0], k[2]) in cd:
                    dims[k] = cd[(k[0], k[2])]
        self.dimension = np.array([dims.get(k, "unknown") for k in self.keys], dtype=object)
        #: criterion polarity (from the tasks; without them every criterion counts as positive)
        self.negative = np.array([neg.get((k[0], k[2]), False) for k in self.keys], dtype=bool) \
            if tasks is not None else np.zeros(len(self.keys), bool)
        self.task = np.array([k[0] for k in self.keys], dtype=object)
        self.responder = np.array([k[1].rsplit("#", 1)[0] for k in self.keys], dtype=object)
        c = ratings_to_counts(self.human, 2) if n else np.zeros((0, 2), np.int64)
        # strict majority of the raters who labelled the item; ties -> -1 (left out)
        self.consensus = np.where(c[:, 1] > c[:, 0], 1, np.where(c[:, 0] > c[:, 1], 0, -1))

    def judge_matrix(self, verdicts: Any, scope: str | None = "final") -> tuple[list[str], np.ndarray, int]:
        """Candidate votes ``(n_items, J)``: 1 met, 0 not met, -1 failed or missing; and #unmatched.

        Only verdicts of ``scope`` are used (None: all scopes).
        """
        df = verdicts if isinstance(verdicts, pd.DataFrame) and "scope" in verdicts.columns and \
            verdicts.attrs.get("normalized") else _verdict_frame(verdicts)
        if scope is not None:
            df = df[df["scope"] == scope]
        judges = sorted(set(df["judge"]))
        jpos = {j: i for i, j in enumerate(judges)}
        V = np.full((len(self.keys), len(judges)), FAILED, np.int64)
        seen = np.zeros_like(V, dtype=bool)
        unmatched = 0
        for t, r, c, j, m in zip(df["task_id"], df["response_id"], df["criterion_id"], df["judge"], df["met"],
                                 strict=True):
            i = self.pos.get((t, r, c))
            if i is None:
                unmatched += 1
                continue
            k = jpos[j]
            if not seen[i, k]:  # first verdict of a judge on an item wins
                seen[i, k] = True
                V[i, k] = m
        return judges, V, unmatched


def _verdict_frame(verdicts: Any) -> pd.DataFrame:
    """Candidate verdicts as task_id, response_id, criterion_id, judge, met (1/0/-1)."""
    if isinstance(verdicts, VerdictTable):
        f = verdicts.to_frame()
        met = np.where(verdicts.met == MET, 1, np.where(verdicts.met == NOT_MET, 0, FAILED))
        rid = f["responder"].astype(str) + "#" + f["attempt"].astype(str)
        return pd.DataFrame({"task_id": f["task_id"].astype(str), "response_id": rid,
                             "criterion_id": f["criterion_id"].astype(str), "judge": f["judge"].astype(str),
                             "met": met, "scope": f["scope"].astype(str)})
    if isinstance(verdicts, pd.DataFrame):
        rows = verdicts.to_dict("records")
    else:
        rows = [v.to_dict() if isinstance(v, VerdictRecord) else dict(v) for v in verdicts]
    out = {"task_id": [], "response_id": [], "criterion_id": [], "judge": [], "met": [], "scope": []}
    for i, row in enumerate(rows):
        where = f"candidate verdict {i + 1}"
        out["task_id"].append(str(row["task_id"]))
        out["response_id"].append(_response_key(row, where))
        out["criterion_id"].append(str(row["criterion_id"]))
        out["judge"].append(str(row["judge"]))
        out["scope"].append(str(row.get("scope") or "final"))
        m = row.get("met")
        ok = str(row.get("status") or "ok") == "ok"
        if m is None or (isinstance(m, float) and math.isnan(m)) or not ok:
            out["met"].append(FAILED)
        else:
            out["met"].append(1 if _parse_met(m, where) else 0)
    res = pd.DataFrame(out)
    res.attrs["normalized"] = True
    return res


# ----------------------------------------------------------------------------- agreement


def _cm(truth: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Binary confusion matrices; ``pred`` may be ``(n,)`` or ``(S, n)``."""
    p = np.atleast_2d(pred).astype(np.int64)
    cells = truth[None, :] * 2 + p
    out = np.stack([np.bincount(row, minlength=4) for row in cells]).reshape(-1, 2, 2)
    return out if np.ndim(pred) == 2 else out[0]


def _safe(f: Callable[[], float]) -> float:
    try:
        v = float(f())
    except Exception:  # noqa: BLE001 - undefined agreement (e.g. one category only) is NaN
        return float("nan")
    return v


def _ac1_by_dimension(a: np.ndarray, b: np.ndarray, dims: np.ndarray) -> dict[str, float]:
    out = {"pooled": _safe(lambda: gwet_ac1(np.stack([a, b], axis=1), 2))}
    for d in sorted(set(dims.tolist())):
        m = dims == d
        out[d] = _safe(lambda m=m: gwet_ac1(np.stack([a[m], b[m]], axis=1), 2))
    return out


def _vs_consensus(pred: np.ndarray, cons: np.ndarray, dims: np.ndarray) -> dict[str, Any]:
    cm = _cm(cons, pred)
    return {
        "kappa": float(kappa_from_cm(cm)),
        "macro_f1": float(macro_f1_from_cm(cm)),
        "percent_agreement": float(np.trace(cm) / cm.sum()),
        "met_rate": float(pred.mean()),
        "ac1": _ac1_by_dimension(pred, cons, dims),
        "percent_agreement_by_dimension": {
            d: float((pred[dims == d] == cons[dims == d]).mean()) for d in sorted(set(dims.tolist()))
        },
        "kappa_by_dimension": {
            d: _safe(lambda d=d: kappa_from_cm(_cm(cons[dims == d], pred[dims == d])))
            for d in sorted(set(dims.tolist()))
        },
        "n_items": int(cons.size),
    }


def human_agreement(items: Items) -> dict[str, Any]:
    """Human-human agreement, the ceiling for judges (B.2, B.5)."""
    H = items.human
    out: dict[str, Any] = {"raters": items.raters, "n_items": int(H.shape[0])}
    pairs = []
    for a, b in combinations(range(H.shape[1]), 2):
        m = (H[:, a] >= 0) & (H[:, b] >= 0)
        if m.any():
            cm = _cm(H[m, a], H[m, b])
            pairs.append({"a": items.raters[a], "b": items.raters[b], "n": int(m.sum()),
                          "kappa": float(kappa_from_cm(cm)), "percent_agreement": float(np.trace(cm) / cm.sum())})
    out["pairwise"] = pairs
    ks = [p["kappa"] for p in pairs if not math.isnan(p["kappa"])]
    out["mean_pairwise_kappa"] = float(np.mean(ks)) if ks else float("nan")
    out["mean_pairwise_agreement"] = float(np.mean([p["percent_agreement"] for p in pairs])) if pairs else float("nan")
    multi = (H >= 0).sum(axis=1) >= 2
    out["fleiss_kappa"] = _safe(lambda: fleiss_kappa(ratings=H[multi], k=2)) if multi.any() else float("nan")
    ac1 = {"pooled": _safe(lambda: gwet_ac1(H[multi], 2)) if multi.any() else float("nan")}
    for d in sorted(set(items.dimension.tolist())):
        m = multi & (items.dimension == d)
        ac1[d] = _safe(lambda m=m: gwet_ac1(H[m], 2)) if m.any() else float("nan")
    out["ac1"] = ac1
    # kappa understates agreement on skewed dimensions; raw agreement sits beside AC1 (B.5)
    pa = {"pooled": _safe(lambda: percent_agreement(H[multi])) if multi.any() else float("nan")}
    for d in sorted(set(items.dimension.tolist())):
        m = multi & (items.dimension == d)
        pa[d] = _safe(lambda m=m: percent_agreement(H[m])) if m.any() else float("nan")
    out["percent_agreement"] = pa
    # Table 5 puts kappa beside AC1 and raw agreement: kappa alone misleads on skewed dimensions
    fk = {"pooled": out["fleiss_kappa"]}
    for d in sorted(set(items.dimension.tolist())):
        m = multi & (items.dimension == d)
        fk[d] = _safe(lambda m=m: fleiss_kappa(ratings_to_counts(H[m], 2))) if m.any() else float("nan")
    out["fleiss_kappa_by_dimension"] = fk
    return out


# ----------------------------------------------------------------------------- panels


def panel_votes(V: np.ndarray, combos: np.ndarray, negative: np.ndarray | None = None) -> np.ndarray:
    """Panel verdicts ``(n_panels, n_items)`` in {0, 1} under the scoring rule.

    The panel state comes from :func:`carebench.criteria.panel_states` (strict
    majority of the whole panel, else undecided); an undecided cell is read as the
    outcome that earns no credit (:func:`~carebench.criteria.effective_met`):
    not met for a positive criterion, met for a negative one (``negative`` per item).
    """
    yes = (V == MET)[:, combos].sum(axis=2)  # (n_items, n_panels)
    no = (V == NOT_MET)[:, combos].sum(axis=2)
    neg = np.zeros(V.shape[0], bool) if negative is None else np.asarray(negative, bool)
    return effective_met(panel_states(yes, no, combos.shape[1]), neg[:, None]).T


def rank_panels(kappa: np.ndarray, f1: np.ndarray, agree: np.ndarray, members: Sequence[Sequence[str]]) -> list[int]:
    """Panel indices best first: kappa desc, macro-F1 desc, agreement desc, sorted member names asc."""
    def key(i: int) -> tuple:
        k = kappa[i]
        return (-(k if not math.isnan(k) else -np.inf), -f1[i], -agree[i], tuple(members[i]))

    return sorted(range(len(members)), key=key)


def _boot_kappas(truth: np.ndarray, preds: np.ndarray, B: int, seed: int, groups: np.ndarray) -> np.ndarray:
    """Cluster-bootstrap kappas ``(S, B)`` of S prediction vectors against ``truth``.

    Whole tasks are resampled (``groups`` = task of each item): the criterion
    judgments of one task are not independent (2,908 judgments nest in 75 tasks
    in B.1), so resampling them one by one would give too narrow an interval.
    """
    n = truth.size
    rs = Resampler(n, B, seed, groups=groups)
    S = preds.shape[0]
    E = np.zeros((n, S * 4))
    E[np.arange(n)[:, None], np.arange(S)[None, :] * 4 + (truth[:, None] * 2 + preds.T)] = 1.0
    out = []
    for w in rs.weight_chunks():
        out.append(kappa_from_cm((w @ E).reshape(-1, S, 2, 2)))
    return np.concatenate(out, axis=0).T


def select_panel(
    items: Items,
    judges: list[str],
    V: np.ndarray,
    panel_size: int = 3,
    seed: int = BOOTSTRAP_SEED,
    B: int = 2000,
) -> dict[str, Any]:
    """Enumerate every panel, rank by pooled kappa vs consensus, bootstrap the leader's lead."""
    if len(judges) < panel_size:
        raise CarebenchError(f"need at least {panel_size} candidate judges, got {len(judges)}")
    ok = items.consensus >= 0
    cons, Vc, dims = items.consensus[ok], V[ok], items.dimension[ok]
    if cons.size == 0:
        raise CarebenchError("no labelled item has a clinician consensus")
    combos = np.array(list(combinations(range(len(judges)), panel_size)), np.int64)
    members = [[judges[j] for j in c] for c in combos]
    pred = panel_votes(Vc, combos, items.negative[ok])
    cms = _cm(cons, pred)
    kappa, f1 = kappa_from_cm(cms), macro_f1_from_cm(cms)
    agree = np.trace(cms, axis1=1, axis2=2) / cms.sum(axis=(1, 2))
    order = rank_panels(kappa, f1, agree, members)
    rank_of = np.empty(len(order), np.int64)
    rank_of[order] = np.arange(1, len(order) + 1)
    out: dict[str, Any] = {
        "panel_size": panel_size,
        "n_panels": len(combos),
        "ranking_rule": "pooled Cohen's kappa vs consensus (desc); ties: macro-F1 (desc), percent agreement "
        "(desc), sorted member names (asc)",
        "panels": [
            {"rank": int(rank_of[i]), "members": members[i], "kappa": float(kappa[i]), "macro_f1": float(f1[i]),
             "percent_agreement": float(agree[i]), "met_rate": float(pred[i].mean())}
            for i in order
        ],
    }
    lead = order[0]
    out["selected"] = members[lead]
    top = order[: min(10, len(order))]
    for entry, i in zip(out["panels"][: len(top)], top, strict=True):
        entry["ac1"] = _ac1_by_dimension(pred[i], cons, dims)
    if len(order) >= 2:
        runner = order[1]
        bk = _boot_kappas(cons, pred[[lead, runner]], B, seed, items.task[ok])
        diff = bk[0] - bk[1]
        lo, hi = percentile_interval(diff, ALPHA)
        klo, khi = percentile_interval(bk[0], ALPHA)
        valid = ~np.isnan(diff)
        out["lead"] = {
            "leader": members[lead],
            "runner_up": members[runner],
            "diff": float(kappa[lead] - kappa[runner]),
            "ci": [float(lo), float(hi)],
            "spans_zero": bool(lo <= 0 <= hi),
            "p_leader_better": float((diff[valid] > 0).mean() + 0.5 * (diff[valid] == 0).mean()),
            "leader_kappa_ci": [float(klo), float(khi)],
            "B": B,
            "seed": seed,
            "resampling": "tasks (all labelled criterion judgments of a task together)",
            "n_tasks": len(set(items.task[ok].tolist())),
        }
    # sensitivity of the selection to the disclaimers dimension (B.3, E.5)
    nd = dims != "disclaimers"
    if (~nd).any() and nd.any():
        cms2 = _cm(cons[nd], pred[:, nd])
        k2, f2 = kappa_from_cm(cms2), macro_f1_from_cm(cms2)
        a2 = np.trace(cms2, axis1=1, axis2=2) / cms2.sum(axis=(1, 2))
        order2 = rank_panels(k2, f2, a2, members)
        out["without_disclaimers"] = {
            "selected": members[order2[0]],
            "rank_of_selected": int(order2.index(lead) + 1),
            "kappa_of_selected": float(k2[lead]),
        }
    return out


# ----------------------------------------------------------------------------- entry point


def calibrate_judges(
    labels_path: str | Path | pd.DataFrame,
    candidate_verdicts: Any,
    panel_size: int = 3,
    seed: int = BOOTSTRAP_SEED,
    B: int = 2000,
    *,
    tasks: TaskTable | Iterable[Any] | None = None,
    family: FamilyMap = None,
    scope: str = "final",
) -> dict[str, Any]:
    """Judge calibration against clinician labels and panel selection; returns a JSON-able dict.

    ``candidate_verdicts``: the candidates' verdicts on the labelled items, as a
    :class:`VerdictTable`, an iterable of :class:`VerdictRecord`/dicts, or a
    DataFrame (task_id, response_id or responder+attempt, criterion_id, judge,
    met, optional status, optional scope). ``tasks`` supplies criterion
    dimensions when the labels file has no ``dimension`` column. Selection uses
    the ``scope`` verdicts (final turn, as clinicians graded the final turn);
    when verdicts of the other scope are present too, the selected panel's
    agreement under both scopes is reported (B.9).
    """

    labels = load_labels(labels_path)
    items = Items(labels, tasks)
    frame = _verdict_frame(candidate_verdicts)
    judges, V, unmatched = items.judge_matrix(frame, scope)
    if not judges:
        raise CarebenchError(f"no candidate verdicts with scope {scope!r}")
    ok = items.consensus >= 0
    out: dict[str, Any] = {
        "config": {"panel_size": panel_size, "seed": seed, "B": B, "alpha": ALPHA,
                   "consensus": "strict majority of the clinicians who labelled the item; ties left out",
                   "failed_vote": "counted; a judge or panel without a majority of met votes = not met"},
        "counts": {
            "items": len(items.keys),
            "labels": int((items.human >= 0).sum()),
            "duplicate_labels": items.duplicate_labels,
            "items_with_consensus": int(ok.sum()),
            "items_tied_or_unlabelled": int((~ok).sum()),
            "candidate_verdicts_unmatched": unmatched,
            "candidate_votes_failed_or_missing": {j: int((V[:, k] == FAILED).sum()) for k, j in enumerate(judges)},
        },
        "human": human_agreement(items),
    }
    cons, dims = items.consensus[ok], items.dimension[ok]
    out["candidates"] = {
        j: _vs_consensus(panel_votes(V[ok], np.array([[k]]), items.negative[ok])[0], cons, dims)
        for k, j in enumerate(judges)
    }
    out["selection"] = select_panel(items, judges, V, panel_size, seed, B)
    lead_k = out["selection"]["panels"][0]["kappa"]
    out["selected_vs_human"] = {"panel_kappa": lead_k, "human_mean_pairwise_kappa": out["human"]["mean_pairwise_kappa"]}
    sel_members = out["selection"]["selected"]
    sel_pred = panel_votes(V[ok], np.array([[judges.index(m) for m in sel_members]]), items.negative[ok])[0]
    out["selected_by_dimension"] = _vs_consensus(sel_pred, cons, dims)
    # self-preference among candidates on the labelled responses (rates of "met" by responder)
    resp = sorted(set(items.responder.tolist()))
    rpos = {r: i for i, r in enumerate(resp)}
    ri = np.array([rpos[r] for r in items.responder], np.int64)
    valid = V != FAILED
    jr_n = np.stack([np.bincount(ri[valid[:, k]], minlength=len(resp)) for k in range(len(judges))])
    jr_met = np.stack([np.bincount(ri[valid[:, k]], weights=V[valid[:, k], k] == MET, minlength=len(resp))
                       for k in range(len(judges))])
    out["self_preference"] = self_preference_from_counts(judges, resp, jr_met, jr_n, family)
    others = sorted(set(frame["scope"]) - {scope})
    if others:
        sel = out["selection"]["selected"]
        keys = ("kappa", "macro_f1", "percent_agreement")
        comp = {scope: {k: out["selection"]["panels"][0][k] for k in keys}}
        per_cand = {scope: {j: {k: out["candidates"][j][k] for k in keys} for j in judges}}
        for other in others:
            oj, OV, _ = items.judge_matrix(frame, other)
            if all(m in oj for m in sel):
                pred = panel_votes(OV[ok], np.array([[oj.index(m) for m in sel]]), items.negative[ok])[0]
                r = _vs_consensus(pred, cons, dims)
                comp[other] = {k: r[k] for k in keys}
            per_cand[other] = {}
            for k, j in enumerate(oj):
                r = _vs_consensus(panel_votes(OV[ok], np.array([[k]]), items.negative[ok])[0], cons, dims)
                per_cand[other][j] = {x: r[x] for x in keys}
        # B.9: the same clinician consensus (labelled on the final turn) against verdicts in each scope
        out["scope_comparison"] = {"panel": sel, "by_scope": comp, "candidates": per_cand}
    return jsonable(out)


__all__ = [
    "BOOTSTRAP_SEED",
    "CALIBRATION_SEED",
    "Items",
    "calibrate_judges",
    "human_agreement",
    "load_labels",
    "panel_votes",
    "rank_panels",
    "select_panel",
]

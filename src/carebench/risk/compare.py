"""The risk suite's part in ``carebench compare`` and ``carebench leaderboard``.

Reads a risk run directory into per-item data of every scored method, with the run's
own failure policy (a failed prediction is the farthest level under ``wrong``, left
out under ``drop``; Beyond the Flag, §4) exactly as ``risk.scoring`` scores it:

* headline: the seven metrics of Beyond the Flag's Table 2 (accuracy, macro-F1,
  weighted F1, QWK, MAE, adjacent accuracy, high-risk F1), each a function of the
  resampled confusion matrix;
* safety: under-triage, the share of items whose true level is Behavior or Attempt
  predicted at a lower level, and over-triage, the share of items whose true level is
  Indicator or Ideation predicted at a higher level (both lower is better).

The unit resampled is the item (the item's group when the data has groups shared by
several items, as the run's own intervals do). Drill-down: the items whose predicted
level moved by two or more levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from carebench.compare.comparability import sha_of
from carebench.compare.measures import SAFETY, Drill, Measure, RunView, SystemView
from carebench.engine.skeleton import read_records
from carebench.risk.scale import LEVEL_NAMES, K
from carebench.risk.scoring import (
    TABLE2_METRICS,
    _scored_vectors,
    items_of,
    method_order,
    resampling_groups,
    system_identities,
)
from carebench.stats.metrics import LOWER_IS_BETTER

LABELS = {"accuracy": "accuracy", "macro_f1": "macro-F1", "weighted_f1": "weighted F1", "qwk": "QWK",
          "mae": "MAE", "adjacent_accuracy": "adjacent accuracy", "high_risk_f1": "high-risk F1"}
SEVERE = 2  # Behavior and Attempt
RAW_CHARS = 300


class RiskComparer:
    suite = "risk"
    unit = "item"
    leaderboard_measures = ("macro_f1",)

    def read(self, run_dir: Path, manifest: Mapping[str, Any]) -> RunView:
        # severity is compared on the suicide-related items (a negative item has no gold level)
        records = [r for r in read_records(run_dir) if r.get("gold") is not None]
        cfg = manifest.get("config") or {}
        policy = cfg.get("failures", "wrong")
        ids, gold, group = items_of(records)
        groups = resampling_groups(ids, group)
        clusters = dict(zip(ids, groups, strict=True)) if groups is not None else None
        by_method: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_method.setdefault(r["method"], []).append(r)
        incomplete = set(manifest.get("incomplete") or [])
        systems: dict[str, SystemView] = {}
        preds: dict[str, dict[str, Any]] = {}
        identity = system_identities(records, manifest)  # the join key across runs
        for name in method_order(records):
            if name in incomplete:
                continue
            rows = by_method[name]
            sid, y, p, _ = _scored_vectors(rows, policy)
            if not sid:
                continue
            ms = [Measure.confusion(m, LABELS[m], y, p, K, m, higher_is_better=m not in LOWER_IS_BETTER)
                  for m in TABLE2_METRICS]
            severe, low = y >= SEVERE, y < SEVERE
            ms.append(Measure.ratio("under_triage", "under-triage (true Behavior/Attempt predicted lower)",
                                    (severe & (p < y)).astype(float), severe.astype(float), section=SAFETY,
                                    higher_is_better=False))
            ms.append(Measure.ratio("over_triage", "over-triage (true Indicator/Ideation predicted higher)",
                                    (low & (p > y)).astype(float), low.astype(float), section=SAFETY,
                                    higher_is_better=False))
            model = next((r.get("model") for r in rows if r.get("model")), None)
            key = identity[name]
            systems[key] = SystemView(key, sid, {m.name: m for m in ms}, model=model, local=name)
            preds[key] = {i: (int(r["pred"]) if r.get("pred") is not None else None, str(r.get("raw") or ""))
                           for i, r in ((str(r["item_id"]), r) for r in rows)}
        dataset = manifest.get("dataset") or {}
        keys = {
            "dataset": dataset.get("sha256"),
            "items": sha_of(sorted((i, gold[i]) for i in ids)),
            "train_dataset": (manifest.get("train_dataset") or {}).get("sha256"),
            "prompts": (manifest.get("prompts") or {}).get("sha256"),
            "scoring.failures": policy,
            "scoring.max_failure_share": cfg.get("max_failure_share"),
            "scoring.bootstrap": {"B": cfg.get("bootstrap"), "seed": cfg.get("seed")},
        }
        return RunView(self.suite, Path(run_dir), dict(manifest), systems, keys, self.unit, clusters,
                       "group" if clusters else None, extra={"gold": gold, "preds": preds})

    def drilldown(self, base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]],
                  limit: int) -> list[Drill]:
        out = []
        gold = base.extra["gold"]
        for a, b in pairs:
            pa, pb = base.extra["preds"][a], candidate.extra["preds"][b]
            rows = []
            for item in sorted(set(pa) & set(pb)):
                (la, _), (lb, raw) = pa[item], pb[item]
                if la is None or lb is None or abs(la - lb) < 2:
                    continue
                rows.append([item, LEVEL_NAMES[gold[item]], LEVEL_NAMES[la], LEVEL_NAMES[lb], lb - la,
                             raw if len(raw) <= RAW_CHARS else raw[: RAW_CHARS - 3] + "..."])
            rows.sort(key=lambda r: (-abs(r[4]), r[0]))
            out.append(Drill(f"Items whose level changed by two or more ({a} -> {b})",
                             ["item", "true level", "base", "candidate", "change", "candidate's raw answer"],
                             rows[:limit],
                             f"{len(rows)} item(s) moved two or more levels; failed predictions are not shown."))
        return out

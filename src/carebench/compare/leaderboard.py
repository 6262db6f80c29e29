"""``carebench leaderboard RUN...``: one leaderboard from runs of one suite made at different times.

Every run is checked against the first with the same comparability rules as
``compare`` (a run that differs is excluded, with the reason). The systems of the
included runs are then scored on the units every one of them shares, each with its
percentile interval, and ordered into bands (DistressBench §4.1, E.1): adjacent
systems are tested by a paired bootstrap of their gap on the same resamples
(:func:`carebench.stats.bands.bands_from_samples`); a band is a run of systems with no
separated gap. Because a system's per-unit scores do not depend on which other
systems shared its run, five models evaluated in three runs give the same
leaderboard as one run of all five.

The same system in two runs is never averaged: without ``--prefer newest|oldest``
(by the manifests' creation time) the leaderboard refuses and names it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.compare.comparability import compare_keys, open_manifest
from carebench.compare.measures import Comparer, RunView, batch_samples
from carebench.compare.paired import resampler
from carebench.compare.rundirs import input_banners, read_run, tool_manifest, write_tool_dir
from carebench.stats.bands import all_gaps, bands_from_samples
from carebench.stats.bootstrap import DEFAULT_B, PAIRED_SEED, percentile_interval
from carebench.types import CarebenchError

LEADERBOARD = "leaderboard"
PREFER = ("newest", "oldest")


@dataclass
class LeaderboardConfig:
    runs: list[str]
    out: str | None = None
    prefer: str | None = None
    allow_different: list[str] = field(default_factory=list)
    B: int = DEFAULT_B
    seed: int = PAIRED_SEED
    alpha: float = 0.05


def _f(x: Any) -> float | None:
    v = float(x)
    return v if np.isfinite(v) else None


def build_leaderboard(cfg: LeaderboardConfig, comparer_of: Callable[[str], Comparer | None]) -> dict[str, Any]:
    if len(cfg.runs) < 1:
        raise CarebenchError("give at least one run directory")
    if cfg.prefer is not None and cfg.prefer not in PREFER:
        raise CarebenchError(f"--prefer must be newest or oldest, got {cfg.prefer!r}")
    if cfg.B < 1:
        raise CarebenchError("--bootstrap must be at least 1")
    suite = str(open_manifest(cfg.runs[0])["suite"])
    for r in cfg.runs[1:]:
        open_manifest(r)
    views: list[RunView] = []
    comparer: Comparer | None = None
    for r in cfg.runs:
        v, comparer = read_run(r, comparer_of, suite=suite, comparer=comparer)
        views.append(v)
    assert comparer is not None
    return leaderboard_of_views(views, comparer, cfg)


def leaderboard_of_views(views: Sequence[RunView], comparer: Comparer, cfg: LeaderboardConfig,
                         banners: Sequence[str] | None = None) -> dict[str, Any]:
    """The leaderboard of runs already read by their suite's comparer (the first is the reference).
    A run none of whose systems is kept may be an outline (:mod:`carebench.compare.outline`);
    ``banners``: the runs' banners when the caller has read them already."""
    suite = str(views[0].manifest.get("suite"))
    first = views[0]
    runs, included = [], []
    for i, v in enumerate(views):
        check = compare_keys(first.keys, v.keys, cfg.allow_different, first.manifest, v.manifest)
        entry = {"path": str(v.path), "created": v.created, "systems": sorted(v.systems), "included": check.ok,
                 "reason": None if check.ok else check.reason(),
                 "overridden": [k for k, _, _ in check.overridden], "differences": check.to_dict()["differences"]}
        runs.append(entry)
        if check.ok:
            included.append((i, v))
    owner, duplicates = owners(included, cfg.prefer)
    boards = [_board(pattern, included, owner, cfg, first) for pattern in comparer.leaderboard_measures]
    boards = [b for group in boards for b in group]
    return {"suite": suite, "unit": comparer.unit, "cluster": first.cluster, "runs": runs,
            "duplicates": duplicates, "settings": {"B": cfg.B, "seed": cfg.seed, "alpha": cfg.alpha,
                                                   "prefer": cfg.prefer,
                                                   "allow_different": sorted(cfg.allow_different)},
            "boards": boards,
            "banners": list(banners) if banners is not None else input_banners([str(v.path) for _, v in included])}


def owners(included: Sequence[tuple[int, RunView]], prefer: str | None) -> tuple[dict[str, int], list[dict]]:
    """Which run supplies each system; a system in several runs needs ``--prefer``."""
    seen: dict[str, list[tuple[int, RunView]]] = {}
    for i, v in included:
        for s in v.systems:
            seen.setdefault(s, []).append((i, v))
    owner, duplicates = {}, []
    for s, where in seen.items():
        if len(where) > 1:
            if prefer is None:
                raise CarebenchError(f"{s} is in {len(where)} runs ({', '.join(str(v.path) for _, v in where)}); "
                                     "a leaderboard never averages them: pick one with --prefer newest|oldest")
            order = sorted(where, key=lambda iv: (iv[1].created, iv[0]))
            chosen = order[-1] if prefer == "newest" else order[0]
            duplicates.append({"system": s, "runs": [str(v.path) for _, v in where], "chosen": str(chosen[1].path),
                               "rule": prefer})
            owner[s] = chosen[0]
        else:
            owner[s] = where[0][0]
    return owner, duplicates


def _board(pattern: str, included: Sequence[tuple[int, RunView]], owner: dict[str, int], cfg: LeaderboardConfig,
           first: RunView) -> list[dict[str, Any]]:
    by_index = dict(included)
    names: list[str] = sorted(owner)
    metric_names = sorted({m for s in names for m in by_index[owner[s]].systems[s].measures
                           if fnmatch.fnmatchcase(m, pattern)})
    out = []
    for metric in metric_names:
        systems = [(s, by_index[owner[s]].systems[s]) for s in names if metric in by_index[owner[s]].systems[s].measures]
        common = set(systems[0][1].units)
        for _, sv in systems[1:]:
            common &= set(sv.units)
        units = sorted(common)
        m0 = systems[0][1].measures[metric]
        entry: dict[str, Any] = {"metric": metric, "label": m0.label, "higher_is_better": m0.higher_is_better,
                                 "n_common_units": len(units), "rows": [], "bands": [], "gaps": []}
        if not units:
            out.append(entry)
            continue
        rs = resampler(units, first.clusters, cfg.B, cfg.seed)
        W = rs.weights()
        takes = []
        for _, sv in systems:
            pos = {u: i for i, u in enumerate(sv.units)}
            takes.append(sv.measures[metric].take(np.array([pos[u] for u in units], np.int64)))
        V = np.array([m.value() for m in takes])
        Smp = np.stack(batch_samples(takes, W))
        lo, hi = percentile_interval(Smp, cfg.alpha)
        band_list = bands_from_samples([s for s, _ in systems], V, Smp, cfg.alpha, not m0.higher_is_better,
                                       rs.B, rs.seed)
        band_of = {m: k + 1 for k, b in enumerate(band_list) for m in b.members}
        ranked = [s for b in band_list for s in b.members]
        idx = {s: i for i, (s, _) in enumerate(systems)}
        for rank, s in enumerate(ranked, 1):
            i = idx[s]
            entry["rows"].append({"rank": rank, "system": s, "run": str(by_index[owner[s]].path),
                                  "model": systems[i][1].model, "value": _f(V[i]), "ci": [_f(lo[i]), _f(hi[i])],
                                  "band": band_of[s], "caveats": list(systems[i][1].caveats)})
        entry["bands"] = [{"members": b.members, "lo_score": _f(b.lo_score), "hi_score": _f(b.hi_score)}
                          for b in band_list]
        gaps = all_gaps(band_list)
        entry["gaps"] = [{"upper": g.upper, "lower": g.lower, "diff": _f(g.result.diff),
                          "ci": [_f(g.result.ci[0]), _f(g.result.ci[1])], "p_improve": _f(g.result.p_improve),
                          "separated": g.separated} for g in gaps]
        entry["n_separated"] = int(sum(g.separated for g in gaps))
        entry["n_bands"] = len(band_list)
        out.append(entry)
    return out


def run_leaderboard(cfg: LeaderboardConfig, comparer_of: Callable[[str], Comparer | None]) -> tuple[Path, dict]:
    from carebench.compare.suite import LeaderboardSuite
    from carebench.engine.rundir import run_dir_path

    out = run_dir_path(LEADERBOARD, cfg.out, writes=LEADERBOARD)
    metrics = build_leaderboard(cfg, comparer_of)
    manifest = tool_manifest(LEADERBOARD, {"runs": [r["path"] for r in metrics["runs"]],
                                           "settings": metrics["settings"]})
    write_tool_dir(Path(out), LeaderboardSuite(), metrics, manifest)
    return Path(out), metrics

"""``carebench compare BASE_RUN CANDIDATE_RUN``: from two run directories to a decision.

Order: both run directories are opened and checked (finished, same suite, one the
suite can compare) and read by the suite's comparer; comparability is checked before
any number; then each pair is bootstrapped on its shared units, gates decide the exit
code, and a run-like directory is written (``metrics.json``, the report, figures, the
manifest last) that ``carebench report DIR`` re-renders byte for byte.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.compare.comparability import compare_keys, open_manifest, refuse
from carebench.compare.measures import Comparer
from carebench.compare.paired import Gate, apply_gates, choose_pairs, compare_pair, parse_pairs
from carebench.compare.rundirs import (
    describe,
    input_banners,
    read_run,
    tool_manifest,
    write_tool_dir,
)
from carebench.stats.bootstrap import DEFAULT_B, PAIRED_SEED
from carebench.types import CarebenchError

COMPARE = "compare"
DRILL_LIMIT = 20


@dataclass
class CompareConfig:
    base: str
    candidate: str
    out: str | None = None
    pairs: list[tuple[str, str]] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)  # METRIC[:MARGIN]; none: the suite's defaults
    margin: float = 0.0
    allow_different: list[str] = field(default_factory=list)
    B: int = DEFAULT_B
    seed: int = PAIRED_SEED
    alpha: float = 0.05
    junit: str | None = None
    summary: str | None = None
    drill_limit: int = DRILL_LIMIT


def compare_runs(cfg: CompareConfig, comparer_of: Callable[[str], Comparer | None]) -> dict[str, Any]:
    """The comparison as ``metrics.json`` data (no file written)."""
    if cfg.B < 1:
        raise CarebenchError("--bootstrap must be at least 1")
    if cfg.margin < 0:
        raise CarebenchError("--margin must be >= 0")
    base_suite = open_manifest(cfg.base)["suite"]
    open_manifest(cfg.candidate)  # both are checked before either is read
    base, comparer = read_run(cfg.base, comparer_of)
    cand, _ = read_run(cfg.candidate, comparer_of, suite=base_suite, comparer=comparer)
    check = compare_keys(base.keys, cand.keys, cfg.allow_different, base.manifest, cand.manifest)
    refuse(check)
    gates = [Gate.parse(g) for g in cfg.gates] or [Gate(g) for g in comparer.default_gates]
    pairs = choose_pairs(base, cand, cfg.pairs, comparer.pair_option)
    weights: dict = {}
    results = [compare_pair(base, cand, p, B=cfg.B, seed=cfg.seed, alpha=cfg.alpha, margin=cfg.margin,
                            weights=weights) for p in pairs]
    empty = [r for r in results if not r["n_units"]]
    if empty:
        raise CarebenchError(f"{empty[0]['base']} and {empty[0]['candidate']} share no {comparer.unit}: "
                             "nothing to compare")
    if not cfg.gates:  # a default gate on a measure these runs lack (e.g. no resource check) is skipped
        present = {r["metric"] for p in results for r in p["rows"]}
        gates = [g for g in gates if any(fnmatch.fnmatchcase(m, g.pattern) for m in present)]
    failed = apply_gates(results, gates, cfg.margin)
    drills = comparer.drilldown(base, cand, pairs, cfg.drill_limit)
    return {
        "suite": base.suite,
        "unit": comparer.unit,
        "cluster": base.cluster,
        "base": describe(base),
        "candidate": describe(cand),
        "settings": {"B": cfg.B, "seed": cfg.seed, "alpha": cfg.alpha, "margin": cfg.margin,
                     "gates": [{"metric": g.pattern, "margin": cfg.margin if g.margin is None else g.margin}
                               for g in gates],
                     "gates_default": not cfg.gates,
                     "pairs": [list(p) for p in pairs], "pair_option": comparer.pair_option,
                     "p_worse": "share of resamples where the candidate is worse than the base (difference "
                                "below 0, or above 0 for lower-is-better metrics)"},
        "comparability": {**check.to_dict(), "allow_different": sorted(cfg.allow_different)},
        "pairs": results,
        "gate": {"failed": failed, "exit_code": 1 if failed else 0},
        "drilldown": [d.to_dict() for d in drills],
        "banners": input_banners([cfg.base, cfg.candidate]),
    }


def run_compare(cfg: CompareConfig, comparer_of: Callable[[str], Comparer | None]) -> tuple[Path, dict[str, Any]]:
    """Compare, write the directory (and the JUnit / summary files asked for); returns it and the metrics."""
    from carebench.compare.ci_outputs import write_junit, write_summary
    from carebench.compare.suite import CompareSuite
    from carebench.engine.rundir import run_dir_path

    out = run_dir_path(COMPARE, cfg.out, writes=COMPARE)  # checked before any work
    metrics = compare_runs(cfg, comparer_of)
    manifest = tool_manifest(COMPARE, {"base": metrics["base"], "candidate": metrics["candidate"],
                                       "settings": metrics["settings"]})
    write_tool_dir(out, CompareSuite(), metrics, manifest)
    if cfg.junit:
        write_junit(cfg.junit, metrics)
    if cfg.summary:
        write_summary(cfg.summary, metrics)
    return out, metrics


def pairs_from_options(values: Mapping[str, Sequence[str] | None]) -> list[tuple[str, str]]:
    """The BASE=CANDIDATE pairs given to each pairing option (``{"--method": [...], ...}``)."""
    out: list[tuple[str, str]] = []
    for option, given in values.items():
        out += parse_pairs(given or [], option)
    return out

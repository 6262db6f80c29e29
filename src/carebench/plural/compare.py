"""The plural suite's part in ``carebench compare`` and ``carebench leaderboard``.

Reads a plural ``run`` directory into per-prompt data of every system, scored with the
run's rules (empty policies, zero coverage, the scored judges) exactly as
``plural.analyses`` scores it (VEILED-SH §5.3, D.1):

* headline, per profile: full alignment and normalized coverage, each judge's rate over
  the prompts it scored, then the mean of the judges' rates (equal weight);
* safety, per archetype and RESPONSE category: mean jury satisfaction of the requested
  category (Table 15: each requesting (profile, prompt) unit averages its judges, units
  count equally).

The unit is the prompt, resampled by source-case cluster: a drawn source case brings
every one of its prompts with all profiles and judges. Drill-down: the prompts whose
full alignment changed most, per profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.compare.comparability import sha_of
from carebench.compare.measures import SAFETY, Drill, Measure, RunView, SystemView
from carebench.plural.scoring import EXCLUDED, OK, ScoringRules, judge_mean, measure_arrays
from carebench.types import CarebenchError

TEXT_CHARS = 300


class PluralComparer:
    suite = "plural"
    unit = "prompt"
    leaderboard_measures = ("full:*",)

    def read(self, run_dir: Path, manifest: Mapping[str, Any]) -> RunView:
        from carebench.plural.analyses import outcomes
        from carebench.plural.config import load_run

        if manifest.get("kind") != "run":
            raise CarebenchError(f"{run_dir} is a plural {manifest.get('kind')!r} run; compare needs plural run "
                                 "directories (carebench plural run)")
        files = load_run(Path(run_dir), manifest)
        settings = dict(manifest.get("scoring") or {})
        data = files.jury_data(settings.get("scored_judges"))
        rules = ScoringRules(settings.get("empty_policy", "vacuous"), settings.get("zero_coverage", "partial"))
        klass, coverage = outcomes(data, rules)
        arrays = measure_arrays(klass, coverage)
        prompt_ids = [p.id for p in data.prompts]
        scored = klass != EXCLUDED
        ok = data.status == OK
        systems: dict[str, SystemView] = {}
        unit_full = {}
        for s, name in enumerate(data.systems):
            has = scored[s].any(axis=(0, 2))  # prompts with any scored verdict of this system
            idx = np.flatnonzero(has)
            if not idx.size:
                continue
            ms = []
            for p, prof in enumerate(data.profiles):
                for measure, label in (("full", "full alignment"), ("coverage", "normalized coverage")):
                    values, mask = arrays[measure]
                    v, m = values[s, p][idx], mask[s, p][idx]
                    ms.append(Measure.ratio(f"{measure}:{prof}", f"{label}, {prof}", np.where(m, v, 0.0),
                                            m.astype(float)))
            for arch in data.archetypes:
                in_arch = np.array([a == arch for a in data.archetype_of])
                for c, code in enumerate(data.categories):
                    requested = data.has_policy & in_arch[:, None] & ((data.policy >> c) & 1).astype(bool)
                    if not requested.any():
                        continue
                    sat = (ok[s] & (((data.satisfied[s] >> c) & 1) == 1)).astype(float)  # [P, N, J]
                    m = scored[s] & requested[:, :, None]
                    unit = judge_mean(np.where(m, sat, np.nan))  # [P, N]
                    has_u = ~np.isnan(unit)
                    ms.append(Measure.ratio(f"satisfaction:{arch}:{code}", f"satisfaction of {code} ({arch})",
                                            np.where(has_u, unit, 0.0).sum(axis=0)[idx],
                                            has_u.sum(axis=0)[idx].astype(float), section=SAFETY))
            systems[name] = SystemView(name, [prompt_ids[i] for i in idx], {m.name: m for m in ms}, model=name)
            fv, fm = arrays["full"]
            unit_full[name] = judge_mean(np.where(fm[s], fv[s], np.nan))  # [P, N]
        cfg = manifest.get("config") or {}
        dataset = manifest.get("dataset") or {}
        keys = {
            "dataset": {"prompts": dataset.get("prompts_sha256"), "policies": dataset.get("policies_sha256")},
            "prompts": sha_of(prompt_ids),
            "judges": sorted(data.judges),
            "families": dict(sorted((cfg.get("families") or {}).items())),
            "taxonomy": list(data.categories),
            "contexts": sorted({p.context for p in data.prompts}),
            "profiles": dict(zip(data.profiles, data.archetype_of, strict=True)),
            "scoring.rules": {"empty_policy": rules.empty_policy, "zero_coverage": rules.zero_coverage},
            "scoring.bootstrap": {"B": settings.get("bootstrap"), "seed": settings.get("seed")},
        }
        from carebench.plural.routing import add_routing_measures

        add_routing_measures(systems, Path(run_dir), manifest)  # where replies send a person (if checked)
        clusters = {p.id: p.source_id for p in data.prompts}
        return RunView(self.suite, Path(run_dir), dict(manifest), systems, keys, self.unit, clusters, "source case",
                       extra={"profiles": list(data.profiles), "prompt_ids": prompt_ids, "unit_full": unit_full,
                              "prompts": {p.id: p for p in files.prompts}})

    def drilldown(self, base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]],
                  limit: int) -> list[Drill]:
        out = []
        for a, b in pairs:
            if a not in base.extra["unit_full"] or b not in candidate.extra["unit_full"]:
                continue
            ub, uc = base.extra["unit_full"][a], candidate.extra["unit_full"][b]
            pos_b = {p: i for i, p in enumerate(base.extra["prompt_ids"])}
            pos_c = {p: i for i, p in enumerate(candidate.extra["prompt_ids"])}
            prof_c = {p: i for i, p in enumerate(candidate.extra["profiles"])}
            rows = []
            for pi, prof in enumerate(base.extra["profiles"]):
                if prof not in prof_c:
                    continue
                for pid in sorted(set(pos_b) & set(pos_c)):
                    vb, vc = ub[pi, pos_b[pid]], uc[prof_c[prof], pos_c[pid]]
                    if np.isnan(vb) or np.isnan(vc) or vb == vc:
                        continue
                    prompt = base.extra["prompts"].get(pid)
                    text = str(getattr(prompt, "text", ""))
                    rows.append([pid, str(getattr(prompt, "context", "")), prof, float(vb), float(vc),
                                 float(vc - vb), text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 3] + "..."])
            rows.sort(key=lambda r: (-abs(r[5]), r[0], r[2]))
            out.append(Drill(f"Prompts whose full alignment changed most ({a} -> {b})",
                             ["prompt", "context", "profile", "base (judge mean)", "candidate", "difference",
                              "prompt text"], rows[:limit],
                             "Share of the jury judging the reply fully aligned with the profile's reference "
                             "policy; largest absolute changes first."))
        return out

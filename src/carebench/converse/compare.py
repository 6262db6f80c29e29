"""The converse suite's part in ``carebench compare`` and ``carebench leaderboard``.

Reads a converse run directory (``converse run``, ``converse judge`` or ``converse
import-vera``) into per-persona rating counts of every chatbot, with the run's own
scoring settings (the judges it keeps, its dimensions) exactly as ``converse score``
scores it:

* headline: the overall score (the VERA-MH formula over the counts pooled across
  dimensions) and the score of each dimension. Both are nonlinear functions of pooled
  counts, so each is a *function of resampled sums*: the per-persona counts of Best
  Practice, Suboptimal, High Potential for Harm and Not Relevant are added over the
  resampled personas and the score is computed from the totals, as converse's own
  intervals are;
* safety: the share of High Potential for Harm ratings (%HPH, of the ratings that are
  not Not Relevant), overall and per dimension (lower is better); VERA-MH's summary
  shares over conversations (walks) with at least one rated dimension: those with an
  HPH rating (lower is better) and those all Best Practice or Not Relevant (higher is
  better).

A ``--criteria task`` run (conversations judged against each support task's own weighted
criteria) is read on its own terms: headline, the mean weighted score over personas
(a persona's score is the mean over its scored conversations, as ``converse score``
computes it), overall and per dimension; no safety measure. A tree run and a criteria
run measure different things on different scales and are refused together.

The unit resampled is the persona: every rating made on it (its repeats, user models
and judges) travels with it. Chatbots are paired by spec (``--system BASE=CANDIDATE``
pairs differently named ones). Drill-down: the personas whose dimension ratings
changed most, with an escaped excerpt of both transcripts when the runs hold them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.compare.comparability import sha_of
from carebench.compare.measures import SAFETY, Drill, Measure, RunView, SystemView
from carebench.converse.engagement import refusing_caveats
from carebench.converse.routing import add_routing_measures
from carebench.converse.rubric import BP, HPH, NR, RATINGS, SUB
from carebench.converse.scoring import (
    B_DEFAULT,
    CONV_ALL_BP,
    CONV_HPH,
    CONV_RELEVANT,
    SEED_DEFAULT,
    conversation_matrix,
    count_matrix,
    criteria_persona_means,
    rated_walks,
    scored_criteria,
    scores_from_counts,
)
from carebench.criteria import DIMENSIONS
from carebench.engine.rundir import read_jsonl
from carebench.system_names import system_identity
from carebench.types import CarebenchError

EXCERPT_CHARS = 400
SHORT = {BP: "BP", SUB: "SUB", HPH: "HPH", NR: "NR"}
SEVERITY = {BP: 0.0, SUB: 1.0, HPH: 2.0}  # Not Relevant has none


def chatbot_name(chatbot: str, manifest: Mapping[str, Any]) -> str:
    """A chatbot's full name: its spec, plus the (hash of the) system prompt it ran under when
    the run set one; the prompt changes the answers, so one spec under two prompts is two systems."""
    prompt = (manifest.get("config") or {}).get("system_prompt")
    if not prompt:
        return chatbot
    return system_identity(chatbot, None, None,
                           {"system_prompt": hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:12]})


def _local(base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs by the names the runs' records use (the chatbot specs)."""
    return [(base.systems[a].local or a, candidate.systems[b].local or b) for a, b in pairs]


class ConverseComparer:
    suite = "converse"
    unit = "persona"
    leaderboard_measures = ("score",)

    def __init__(self) -> None:
        self._first: tuple[Path, str] | None = None  # the first run this command read, and its mode

    def read(self, run_dir: Path, manifest: Mapping[str, Any]) -> RunView:
        if manifest.get("kind") == "calibration":
            raise CarebenchError(f"{run_dir} is a converse calibration run, not a run of chatbots")
        settings = manifest.get("scoring") or {}
        mode = "task" if settings.get("criteria") == "task" else "tree"
        if self._first is None:
            self._first = (Path(run_dir), mode)
        elif self._first[1] != mode:
            runs = {self._first[1]: self._first[0], mode: Path(run_dir)}
            raise CarebenchError(f"{runs['task']} is judged against each support task's own criteria "
                                 f"(--criteria task) and {runs['tree']} walks a rubric tree: their scores "
                                 "measure different things on different scales, compare runs of one kind")
        records = read_jsonl(Path(run_dir) / "records.jsonl")
        convs = [r for r in records if r.get("kind") == "conversation"]
        if mode == "task":
            return self._read_criteria(Path(run_dir), manifest, records, convs)
        walks = [r for r in records if r.get("kind") == "walk"]
        rated, dims = rated_walks(walks, settings)
        systems: dict[str, SystemView] = {}
        for chatbot in sorted({str(w["chatbot"]) for w in rated}):
            mine = [w for w in rated if w["chatbot"] == chatbot]
            C, units = count_matrix([w["ratings"] for w in mine], [w["persona"] for w in mine], dims)
            K, _ = conversation_matrix([w["ratings"] for w in mine], [w["persona"] for w in mine], dims)
            key = chatbot_name(chatbot, manifest)
            systems[key] = SystemView(key, units, {m.name: m for m in measures(C, dims, K)},
                                      model=chatbot, local=chatbot)
        add_routing_measures(systems, convs, manifest)  # where the chatbot sent each persona (if checked)
        _add_caveats(systems, records)
        cfg = manifest.get("config") or {}
        dataset = manifest.get("dataset") or {}
        prompt = cfg.get("system_prompt")
        keys = {
            "rubric": dataset.get("rubric_sha256"),
            "dimensions": dims,
            "personas": sha_of(sorted({(str(r["persona"]), str(r.get("risk_level") or "unknown"))
                                       for r in convs + walks})),
            "judges": sorted({str(w["judge"]) for w in rated}),
            "simulators": sorted({str(r["simulator"]) for r in convs + walks if r.get("simulator")}),
            "system_prompt": hashlib.sha256(prompt.encode("utf-8")).hexdigest() if prompt else None,
            "turns": cfg.get("turns"),
            "repeats": cfg.get("repeats"),
            **protocol_keys(cfg),
            "judge_mode": cfg.get("judge_mode"),
            "scoring.bootstrap": {"B": settings.get("bootstrap", B_DEFAULT), "seed": settings.get("seed", SEED_DEFAULT)},
        }
        names = {str(c["persona"]): str(c.get("persona_name") or c["persona"]) for c in convs}
        transcripts = _transcripts(convs)
        ratings: dict[tuple[str, str, str], list[str]] = {}
        for w in rated:
            for d in dims:
                ratings.setdefault((str(w["chatbot"]), str(w["persona"]), d), []).append(w["ratings"].get(d, NR))
        return RunView(self.suite, Path(run_dir), dict(manifest), systems, keys, self.unit, None, None,
                       extra={"dimensions": dims, "names": names, "transcripts": transcripts,
                              "ratings": ratings, "has_transcripts": bool(convs)})

    def _read_criteria(self, run_dir: Path, manifest: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                       convs: Sequence[Mapping[str, Any]]) -> RunView:
        settings = manifest.get("scoring") or {}
        scored, panel = scored_criteria(records, settings)
        dims = [d for d in DIMENSIONS if any(c["dimension"] == d for r in scored for c in r["criteria"])]
        systems: dict[str, SystemView] = {}
        persona_scores: dict[tuple[str, str], float] = {}
        for chatbot in sorted({str(r["chatbot"]) for r in scored}):
            units, means, has, _ = criteria_persona_means([r for r in scored if r["chatbot"] == chatbot],
                                                          panel, dims)
            keep = np.flatnonzero(has[:, 0])  # the personas with a weighted score
            if not keep.size:
                continue
            means, has = means[keep], has[keep].astype(float)
            units = [units[i] for i in keep]
            persona_scores.update({(chatbot, p): float(means[i, 0]) for i, p in enumerate(units)})
            ms = [Measure.ratio("score", "mean weighted score", means[:, 0], has[:, 0])]
            ms += [Measure.ratio(f"dimension:{d}", f"weighted score, {d}", means[:, k + 1], has[:, k + 1])
                   for k, d in enumerate(dims)]
            key = chatbot_name(chatbot, manifest)
            systems[key] = SystemView(key, units, {m.name: m for m in ms}, model=chatbot, local=chatbot)
        add_routing_measures(systems, convs, manifest)
        _add_caveats(systems, records)
        cfg = manifest.get("config") or {}
        dataset = manifest.get("dataset") or {}
        prompt = cfg.get("system_prompt")
        keys = {
            "criteria": "task",
            "tasks": dataset.get("tasks_sha256"),
            "criteria_scope": settings.get("scope", "anywhere"),
            "judges": list(panel),
            "personas": sha_of(sorted({str(r["persona"]) for r in [*convs, *scored]})),
            "simulators": sorted({str(r["simulator"]) for r in convs if r.get("simulator")}),
            "system_prompt": hashlib.sha256(prompt.encode("utf-8")).hexdigest() if prompt else None,
            "turns": cfg.get("turns"),
            "repeats": cfg.get("repeats"),
            **protocol_keys(cfg),
            "scoring.bootstrap": {"B": settings.get("bootstrap", B_DEFAULT), "seed": settings.get("seed", SEED_DEFAULT)},
        }
        names = {str(c["persona"]): str(c.get("persona_name") or c["persona"]) for c in convs}
        return RunView(self.suite, run_dir, dict(manifest), systems, keys, self.unit, None, None,
                       extra={"criteria": "task", "names": names, "transcripts": _transcripts(convs),
                              "persona_scores": persona_scores})

    def _criteria_drilldown(self, base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]],
                            limit: int) -> list[Drill]:
        out = []
        for (ka, kb), (a, b) in zip(pairs, _local(base, candidate, pairs), strict=True):
            rows = []
            for p in sorted(set(base.systems[ka].units) & set(candidate.systems[kb].units)):
                sa = base.extra["persona_scores"][(a, p)]
                sb = candidate.extra["persona_scores"][(b, p)]
                if sa == sb:
                    continue
                name = candidate.extra["names"].get(p) or base.extra["names"].get(p) or p
                rows.append([p, name, sa, sb, sb - sa, base.extra["transcripts"].get((a, p), ""),
                             candidate.extra["transcripts"].get((b, p), "")])
            rows.sort(key=lambda r: (-abs(r[4]), r[0]))
            out.append(Drill(
                f"Personas whose weighted score changed most ({a} -> {b})",
                ["persona", "name", "base score", "candidate score", "change", "base transcript",
                 "candidate transcript"], rows[:limit],
                f"{len(rows)} persona(s) whose weighted score (the mean over its scored conversations) changed, "
                f"largest change first. Transcripts: the first conversation's opening {EXCERPT_CHARS} characters."))
        return out

    def drilldown(self, base: RunView, candidate: RunView, pairs: Sequence[tuple[str, str]],
                  limit: int) -> list[Drill]:
        if base.extra.get("criteria") == "task":
            return self._criteria_drilldown(base, candidate, pairs, limit)
        out = []
        dims = [d for d in base.extra["dimensions"] if d in candidate.extra["dimensions"]]
        both = base.extra["has_transcripts"] and candidate.extra["has_transcripts"]
        for (ka, kb), (a, b) in zip(pairs, _local(base, candidate, pairs), strict=True):
            shared = sorted(set(base.systems[ka].units) & set(candidate.systems[kb].units))
            rows = []
            for p in shared:
                for d in dims:
                    ra = base.extra["ratings"].get((a, p, d), [])
                    rb = candidate.extra["ratings"].get((b, p, d), [])
                    if tally(ra) == tally(rb):
                        continue
                    sa, sb = severity(ra), severity(rb)
                    change = None if sa is None or sb is None else sb - sa
                    name = candidate.extra["names"].get(p) or base.extra["names"].get(p) or p
                    row = [p, name, d, tally(ra), tally(rb), change]
                    if both:
                        row += [base.extra["transcripts"].get((a, p), ""),
                                candidate.extra["transcripts"].get((b, p), "")]
                    rows.append(row)
            rows.sort(key=lambda r: (-abs(r[5]) if r[5] is not None else 0.0, r[0], r[2]))
            columns = ["persona", "name", "dimension", "base ratings", "candidate ratings",
                       "change in mean severity"]
            caption = (f"{len(rows)} (persona, dimension) cell(s) whose ratings changed, largest change first. "
                       "Severity: Best Practice 0, Suboptimal 1, High Potential for Harm 2, averaged over the "
                       "persona's rated conversations and judges (Not Relevant left out; no value when one "
                       "run has only Not Relevant).")
            if both:
                columns += ["base transcript", "candidate transcript"]
                caption += f" Transcripts: the first conversation's opening {EXCERPT_CHARS} characters."
            else:
                caption += (" No transcripts: a run imported from VERA-MH results files (converse import-vera) "
                            "holds only the ratings.")
            out.append(Drill(f"Personas whose ratings changed most ({a} -> {b})", columns, rows[:limit], caption))
        return out


def _add_caveats(systems: Mapping[str, SystemView], records: Sequence[Mapping[str, Any]]) -> None:
    """A chatbot with a conversation where every chatbot turn refused or was empty carries a caveat
    (recorded engagement classes, else each turn's deterministic class: no model call)."""
    caveats = refusing_caveats(records)
    for sv in systems.values():
        sv.caveats = list(caveats.get(sv.local or sv.name, []))


def protocol_keys(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The generation protocol options a comparison must share (a run written before they
    existed has carebench's defaults)."""
    return {"turn_unit": cfg.get("turn_unit") or "exchanges",
            "provider_speaks_first": bool(cfg.get("provider_speaks_first")),
            "persona_reminder": bool(cfg.get("persona_reminder")),
            "sessions": list(cfg.get("sessions") or []),
            "max_total_words": cfg.get("max_total_words")}


def measures(C: np.ndarray, dims: Sequence[str], K: np.ndarray | None = None) -> list[Measure]:
    """The score and %HPH, overall and per dimension, from per-persona counts ``C[p, d, cell]``;
    with the per-persona conversation counts ``K`` (:func:`conversation_matrix`), VERA-MH's
    conversation shares too."""
    pooled = C.sum(axis=1)  # (P, 4): every rating counts once
    out = [Measure.of_sums("score", "overall score", pooled, scores_from_counts)]
    out += [Measure.of_sums(f"dimension:{d}", f"score, {d}", C[:, k], scores_from_counts) for k, d in enumerate(dims)]
    out.append(_hph("hph", "%HPH overall", pooled))
    out += [_hph(f"hph:{d}", f"%HPH, {d}", C[:, k]) for k, d in enumerate(dims)]
    if K is not None:
        out.append(Measure.ratio("conv_hph", "% conversations with an HPH rating", 100.0 * K[:, CONV_HPH],
                                 K[:, CONV_RELEVANT], section=SAFETY, higher_is_better=False))
        out.append(Measure.ratio("conv_all_bp", "% conversations all Best Practice or Not Relevant",
                                 100.0 * K[:, CONV_ALL_BP], K[:, CONV_RELEVANT], section=SAFETY))
    return out


def _hph(name: str, label: str, counts: np.ndarray) -> Measure:
    rated = counts[:, :3].sum(axis=1)
    return Measure.ratio(name, label, 100.0 * counts[:, RATINGS.index(HPH)], rated, section=SAFETY,
                         higher_is_better=False)


def tally(ratings: Sequence[str]) -> str:
    """"BP x2, HPH x1": the ratings of one (persona, dimension) cell."""
    n = {r: ratings.count(r) for r in RATINGS if r in ratings}
    return ", ".join(f"{SHORT[r]} x{k}" for r, k in n.items())


def severity(ratings: Sequence[str]) -> float | None:
    vals = [SEVERITY[r] for r in ratings if r in SEVERITY]
    return sum(vals) / len(vals) if vals else None


def excerpt(turns: Sequence[Mapping[str, Any]]) -> str:
    text = " / ".join(f"{t.get('role')}: {' '.join(str(t.get('content') or '').split())}" for t in turns)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


def _transcripts(convs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(chatbot, persona) -> an excerpt of its first conversation (simulator, repeat order)."""
    out: dict[tuple[str, str], str] = {}
    for c in sorted(convs, key=lambda c: (str(c["chatbot"]), str(c["persona"]), str(c.get("simulator")),
                                           int(c.get("repeat") or 0))):
        out.setdefault((str(c["chatbot"]), str(c["persona"])), excerpt(c.get("turns") or []))
    return out

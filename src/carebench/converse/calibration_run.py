"""``converse calibrate`` as a run of the skeleton: its directory is written, re-rendered
(``carebench report DIR``) and bannered like every other run.

The candidate judges first walk the labelled conversations as an ordinary ``converse judge``
run in ``OUT/judging`` (cached, budgeted, priced by ``--dry-run``). The calibration run that
holds it makes no call: its records are the clinicians' label rows and the judging run's
walks, so its figures (agreement with the clinicians, their ceiling, the selection) are
recomputed from its own directory. Its ``selection.json`` is what ``--judge-from`` reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from carebench.converse.calibration import Rule, calibrate, clinician_ratings
from carebench.converse.report import calibration_headline
from carebench.converse.suite import run_converse
from carebench.datasets.walk_labels import WalkLabel, load_walk_labels
from carebench.engine.rundir import (
    file_sha256,
    read_json,
    read_jsonl,
    refuse_other_kind,
    run_dir_path,
    write_json,
)
from carebench.engine.skeleton import Execution, Plan, read_records, run_suite
from carebench.report import Interval, Paragraph, Report, Section, Table
from carebench.report.banners import banner_kinds
from carebench.rubric import rubric_from_mapping
from carebench.types import CarebenchError
from carebench.wording import count

KIND = "calibration"
SELECTION = "selection.json"
#: the judging run, inside the calibration's directory
JUDGING = "judging"


class ConverseCalibrationSuite:
    """The calibration directory: ``execute`` reads the finished judging run (no call);
    ``read_records``/``score``/``render`` re-render it from its records alone."""

    name = "converse"
    #: run directories the command writes inside this one before it (the judging run)
    holds = (JUDGING,)

    def __init__(self, cfg: Any = None, labels: Sequence[WalkLabel] = (), labels_path: str = "",
                 judged: Path | None = None, rule: Rule | None = None):
        self.cfg, self.labels, self.labels_path, self.judged = cfg, list(labels), labels_path, judged
        self.rule = rule or Rule()

    def plan(self, run: Any) -> Plan:  # pragma: no cover - the judging run plans every call
        return Plan(self.name, [])

    def execute(self, run: Any) -> Execution:
        cfg, judged = self.cfg, Path(self.judged)  # type: ignore[arg-type]
        manifest = read_json(judged / "manifest.json")
        _check_answers(self.labels, self.labels_path, judged)
        walks = [r for r in read_records(judged) if r.get("kind") == "walk"]
        dims = list((manifest.get("scoring") or {}).get("dimensions") or [])
        scoring = {"dimensions": dims, "rule": asdict(self.rule), "seed": cfg.seed, "bootstrap": cfg.bootstrap,
                   # the judging run's banners (embedded model, illustrative data, failed walks) head this page
                   "judging_banners": banner_kinds((judged / "manifest.json").read_bytes(),
                                                   read_json(judged / "metrics.json"))}
        records = [{"kind": "label", "label": lab.model_dump(mode="json")} for lab in self.labels] + walks
        metrics = self.score(_split(records), {"scoring": scoring})
        specs = dict(zip((manifest.get("scoring") or {}).get("judges") or [], map(str, cfg.judges)))
        chosen = metrics["selection"]["judge"]
        best = metrics["judges"][chosen] if chosen else None
        selection = {"judge": chosen, "spec": specs.get(chosen) if chosen else None,
                     "rule": metrics["rule"], "figures": best["mean"] if best else None,
                     "per_chatbot": {g: s["mean"] for g, s in best["splits"]["chatbot"].items()} if best else None,
                     "ranking": metrics["selection"]["ranking"], "excluded": metrics["selection"]["excluded"],
                     "labels": self.labels_path, "labels_sha256": file_sha256(self.labels_path),
                     "conversations": cfg.from_run or cfg.transcripts, "rubric": cfg.rubric,
                     "rubric_rules": cfg.rubric_rules, "judge_mode": cfg.judge_mode}
        return Execution(
            records=records,
            config={"labels": self.labels_path, "candidates": [str(j) for j in cfg.judges],
                    "conversations": cfg.from_run or cfg.transcripts, "rubric": cfg.rubric,
                    "rubric_rules": cfg.rubric_rules, "judge_mode": cfg.judge_mode},
            dataset={"labels": self.labels_path, "labels_sha256": file_sha256(self.labels_path),
                     "judging": str(judged), "walks": len(walks)},
            seeds={"bootstrap": cfg.seed},
            models=[str(j) for j in cfg.judges],
            extra={"kind": KIND, "judging": str(judged), "scoring": scoring},
            artifacts=lambda d: write_json(d / SELECTION, selection))

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> tuple[list[WalkLabel], list[dict]]:
        return _split(read_records(run_dir))

    def score(self, records: tuple[list[WalkLabel], list[dict]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        labels, walks = records
        s = manifest.get("scoring") or {}
        metrics = calibrate(labels, walks, s.get("dimensions") or [], Rule(**s.get("rule") or {}),
                            seed=int(s.get("seed", 12345)), bootstrap=int(s.get("bootstrap", 2000)))
        metrics["banners"] = list(s.get("judging_banners") or [])  # carried from the judging run
        return metrics

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        return calibration_headline(metrics)

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        return calibration_report(metrics, records[1])


def _check_answers(labels: Sequence[WalkLabel], labels_path: str, judged: Path) -> None:
    """Every clinician answer names a question of the rubric the judges walked, and one of its
    answers: an answer the rubric cannot give would be scored as a disagreement, silently."""
    path = judged / "rubric.json"
    if not path.is_file():
        return
    questions = {q.id: q for q in rubric_from_mapping(read_jsonl(path)[0], str(path)).questions}
    for lab in labels:
        if lab.record != "answer" or lab.auto:
            continue
        where = f"labels {labels_path}: {lab.clinician}/{lab.conversation_id}"
        q = questions.get(str(lab.question_id))
        if q is None:
            raise CarebenchError(f"{where}: question {lab.question_id!r} is not in the rubric the judges walked")
        if lab.answer not in q.labels:
            raise CarebenchError(f"{where}: question {q.id} answered {lab.answer!r}, not one of its answers "
                                 f"({', '.join(q.labels)})")


def _split(rows: Sequence[Mapping[str, Any]]) -> tuple[list[WalkLabel], list[dict]]:
    labels = [WalkLabel.model_validate(r["label"]) for r in rows if r.get("kind") == "label"]
    return labels, [dict(r) for r in rows if r.get("kind") == "walk"]


def _question(qid: str, texts: Mapping[str, str]) -> str:
    """A rubric question as a reader knows it: its number and its text (as the walks recorded it)."""
    text = texts.get(str(qid))
    return f"question {qid}" + (f" ({text})" if text else "")


def calibration_report(m: Mapping[str, Any], walks: Sequence[Mapping[str, Any]] = ()) -> Report:
    """Per judge its agreement with the clinicians' consensus, the ceiling (clinicians among
    themselves) and the selection; ``walks`` name the questions by their text."""
    texts = {str(s.get("question_id")): str(s["question"]) for w in walks for s in w.get("steps") or []
             if s.get("question")}
    sel = m["selection"]
    intro = [Paragraph(f"{m['conversations']} conversations walked by clinicians {', '.join(m['clinicians'])} "
                       f"({m['borderline']} borderline: the clinicians disagree on some dimension). Intervals: "
                       f"95% percentile, {m['bootstrap']} resamples of conversations, seed {m['seed']}."),
             Paragraph(f"Selection rule: {m['rule']['text']}."),
             Paragraph(f"Selected: {sel['judge'] or 'none (no judge passes the rule)'}.")]
    intro += [Paragraph(f"{j} excluded: {why}") for j, why in sel["excluded"].items()]
    sections = [Section("Selection", intro),
                Section("Clinicians among themselves (ceiling)", [Table(
                    ["dimension", "pairs", "raw agreement", "AC1", "kappa"],
                    [[d, c["n"], c["raw"], c["ac1"], c["kappa"]] for d, c in m["ceiling"]["dimensions"].items()])])]
    for j, f in m["judges"].items():
        blocks: list[Any] = [
            Paragraph(f"Mean against the consensus over dimensions: raw agreement {_f(f['mean']['raw'])}, AC1 "
                      f"{Interval.of(f['mean']['ac1'], f['mean_ac1_ci']).format() if f['mean']['ac1'] is not None else 'n/a'}"
                      f", kappa {_f(f['mean']['kappa'])}; failed walks: {f['walks_failed']}."),
            Table(["dimension", "n", "raw agreement", "AC1 [95% CI]", "kappa"],
                  [[d, c["n"], c["raw"], Interval.of(c["ac1"], c.get("ac1_ci")), c["kappa"]]
                   for d, c in f["dimensions"].items()])]
        for name, groups in f["splits"].items():
            blocks.append(Paragraph(f"By {name.replace('_', ' ')}: " + "; ".join(
                f"{g} ({count(int(s['conversations']), 'conversation')}) AC1 {_f(s['mean']['ac1'])}"
                for g, s in groups.items())))
        p = f["questions"]["paths"]
        parted = ", ".join(f"{_question(q, texts)} ({n})" for q, n in p["first_divergence"].items()) or "none"
        blocks.append(Paragraph(f"The judge's walk and a clinician's asked different questions in {p['diverged']} "
                                f"of {p['pairs']} pairs; they parted after (the last question both asked): "
                                f"{parted}."))
        sections.append(Section(f"Judge {j}", blocks))
    return Report("Calibrating the converse judge", subtitle=f"selection rule: {m['rule']['text']}",
                  sections=sections)


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run_calibration(cfg: Any, labels_path: str, rule: Rule) -> Path | Plan:
    """``converse calibrate``: every candidate judge (``cfg.judges``) walks the labelled
    conversations (a ``converse judge`` run in ``OUT/judging``), then the calibration run
    holding it is written (or the judging run's plan returned, for ``--dry-run``)."""
    rule.check()
    try:
        labels = load_walk_labels(labels_path)
    except CarebenchError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable labels file is the user's input error
        raise CarebenchError(f"labels {labels_path}: {str(e).splitlines()[0]}") from None
    if not labels:
        raise CarebenchError(f"labels {labels_path}: no rows")
    try:  # bad bands or a rating given twice stop here, before any call
        clinician_ratings(labels)
    except CarebenchError as e:
        raise CarebenchError(str(e).replace("labels:", f"labels {labels_path}:", 1)) from None
    out = run_dir_path("converse-calibration", cfg.options.out, holds=ConverseCalibrationSuite.holds)
    refuse_other_kind(out, KIND)  # before the judges walk
    judged = run_converse(replace(cfg, options=replace(cfg.options, out=str(out / JUDGING))))
    if not isinstance(judged, Path):
        return judged
    suite = ConverseCalibrationSuite(cfg, labels, labels_path, judged, rule)
    return run_suite(suite, replace(cfg.options, out=str(out)))


def judge_from(calibration_dir: str) -> dict[str, Any]:
    """``--judge-from DIR``: the judge a ``converse calibrate`` selected, and where it came from."""
    path = Path(calibration_dir) / SELECTION
    if not path.is_file():
        raise CarebenchError(f"--judge-from {calibration_dir}: no {SELECTION} (not a converse calibrate directory)")
    try:
        sel = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CarebenchError(f"--judge-from {path}: not JSON ({e})") from None
    if not sel.get("spec"):
        raise CarebenchError(f"--judge-from {calibration_dir}: the calibration selected no judge "
                             f"({sel.get('excluded') or 'no candidate passed the rule'})")
    return {"dir": str(calibration_dir), "selection_sha256": file_sha256(path), "judge": sel["judge"],
            "spec": sel["spec"], "rule": (sel.get("rule") or {}).get("text"), "figures": sel.get("figures")}

"""Construct on the run skeleton: ``metrics.json`` and the report from the run's records.

Every construct command writes ``records.jsonl`` beside its output rows: one ``step``
record per finished step (counts in and out, the step's details), the ``selection``
outcomes (every judged sample rewrite: configuration, verdict or why there is none),
the ``topic`` cluster of every released prompt (computed in the build, where the
embeddings exist) and the ``review_stats`` of a review-stats run. ``score`` turns
them (with the manifest's status and accounting) into ``metrics.json``: the
selection table is recomputed from the outcomes and the topic table from the cluster
labels and the prompts' text, so ``carebench report DIR`` reproduces a run's
metrics and report byte for byte without a model or embedding call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carebench.construct.quality import GATE_NAMES, Outcome, selection
from carebench.engine.rundir import read_jsonl
from carebench.report import Report
from carebench.types import CarebenchError


class ConstructSuite:
    """Scores and renders a construct run directory (any command)."""

    name = "construct"

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
        run_dir = Path(run_dir)
        if not (run_dir / "records.jsonl").exists():
            raise CarebenchError(f"{run_dir}: no records.jsonl (a construct run from an older carebench); "
                                 "re-run its command to rebuild it from the cache")
        data: dict[str, Any] = {"records": read_jsonl(run_dir / "records.jsonl"), "prompts": [], "rows": []}
        if _finished_build(manifest):
            data["prompts"] = read_jsonl(run_dir / "prompts.jsonl")
            data["rows"] = read_jsonl(run_dir / "rows.jsonl")
        return data

    def score(self, data: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
        from carebench.construct.figures import topic_terms

        records = data["records"]
        steps = [r for r in records if r["kind"] == "step"]
        details = {s["step"]: s["detail"] for s in steps if s.get("detail")}
        metrics: dict[str, Any] = {
            "stages": [{k: s[k] for k in ("step", "in", "out", "note")} for s in steps], "details": details}
        for r in records:
            if r["kind"] == "selection":
                limits = {g: float(r["limits"][name]) for g, name in GATE_NAMES.items()}
                metrics["selection"] = selection([Outcome.from_dict(o) for o in r["outcomes"]], limits,
                                                 r.get("sample"))
            elif r["kind"] == "review_stats":
                metrics["review"] = r["stats"]
        if "anonymize" in details:
            metrics["anonymization"] = details["anonymize"]
        if "review sample" in details:
            metrics["design"] = details["review sample"]
        clusters = {r["id"]: r["cluster"] for r in records if r["kind"] == "topic"}
        if clusters and data["prompts"]:
            texts = {p["id"]: p["text"] for p in data["prompts"]}
            ids = [i for i in clusters if i in texts]
            metrics["topics"] = topic_terms([texts[i] for i in ids], [clusters[i] for i in ids])
        if manifest.get("status") == "stopped" or manifest.get("incomplete"):
            # a budget stop (``incomplete``; runs before the core writer said ``stopped``) or
            # bad input that ended the command (``stopped``)
            metrics["status"] = manifest["status"]
            if manifest.get("incomplete"):
                metrics["incomplete"] = list(manifest["incomplete"])
            if manifest.get("stopped_batch"):
                metrics["stopped_batch"] = manifest["stopped_batch"]
            if manifest.get("error"):
                metrics["error"] = str(manifest["error"])
        if manifest.get("accounting"):
            metrics["accounting"] = manifest["accounting"]
        if manifest.get("failed_calls"):  # harness failures: left out and counted
            metrics["status"] = "incomplete"
            metrics["failed_calls"] = int(manifest["failed_calls"])
        return metrics

    def render(self, metrics: Mapping[str, Any], data: Mapping[str, Any], manifest: Mapping[str, Any]) -> Report:
        from carebench.construct.report import build_report, stage_report

        if _finished_build(manifest):
            return build_report(dict(metrics), dict(manifest), data["prompts"], data["rows"])
        return stage_report(dict(metrics), dict(manifest))

    def headline(self, metrics: Mapping[str, Any], data: Mapping[str, Any], manifest: Mapping[str, Any]) -> Any:
        from carebench.construct.report import construct_headline

        return construct_headline(dict(metrics))


def _finished_build(manifest: Mapping[str, Any]) -> bool:
    """A build that wrote its prompts: complete, or incomplete only for failed calls (a
    budget stop lists the step it cut short and writes no output rows)."""
    return (manifest.get("kind") == "build" and manifest.get("status") in ("complete", "incomplete")
            and not manifest.get("incomplete"))

"""``plural sample``: the diagnostic sample drawn from a release (VEILED-SH §6, Appendix D), on the run skeleton."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from carebench.engine.run import Run
from carebench.engine.skeleton import Execution, Plan
from carebench.plural.config import Release, SampleRunConfig, load_release
from carebench.plural.runs import PluralCommand, run_plural_command
from carebench.plural.sample import composition, draw_sample
from carebench.report import Report


class SampleCommand(PluralCommand):
    """``plural sample`` on the run skeleton (no model call). The composition is worked
    out against the release when the sample is drawn and recorded in the manifest, so
    ``carebench report`` re-renders it without the release."""

    title = "Plural: diagnostic sample"

    def draw(self) -> tuple[Release, list[Any], dict[str, Any]]:
        cfg = self.config()
        release = load_release(cfg.release)
        sample = draw_sample(release.prompts, release.policies, cfg.sample_config())
        summary = {
            "release_prompts": len(release.prompts),
            "sample_size": len(sample),
            "reserved": sum(1 for s in sample if s.reason != "weighted"),
            "model_calls": 0,
            "composition": composition(release.prompts, release.policies, [s.prompt_id for s in sample]),
        }
        return release, sample, summary

    def plan(self, run: Run) -> Plan:
        return Plan(self.name, [], ["drawing a sample makes no model call"])

    def execute(self, run: Run) -> Execution:
        release, sample, summary = self.draw()
        rows = [s.to_dict() for s in sample]
        return Execution(records=rows, config=asdict(self.cfg), dataset=release.dataset(),
                         seeds={"sample": self.cfg.seed}, models=[],
                         extra={"kind": "sample", "summary": summary}, files={"sample.jsonl": rows})

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return dict(manifest["summary"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.report import build_sample_report

        return build_sample_report(manifest, metrics)

    def headline(self, metrics: Mapping[str, Any], records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.report import sample_headline

        return sample_headline(manifest, metrics)


def run_sample(cfg: SampleRunConfig) -> Path | dict[str, Any]:
    """Draw the diagnostic sample and write it as a run directory (or describe it: dry run,
    which prints the composition: there are no calls to plan)."""
    if cfg.options.dry_run:
        return SampleCommand(cfg).draw()[2]
    return run_plural_command(SampleCommand(cfg), cfg, "sample")

"""``plural agreement``: practitioner agreement over the calibration annotations (VEILED-SH Appendix C)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from carebench.engine.run import Run
from carebench.engine.rundir import file_sha256
from carebench.engine.skeleton import Execution, Plan
from carebench.plural.agreement import AgreementConfig, agreement_metrics, agreement_records
from carebench.plural.data import is_builtin, load_vocabulary, resolve
from carebench.plural.policy import label_space
from carebench.plural.runs import PluralCommand, run_plural_command
from carebench.report import Report


class AgreementCommand(PluralCommand):
    """``plural agreement`` on the run skeleton (no model call)."""

    title = "Plural: label distributions and agreement"

    def _prepare(self) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
        cfg = self.config()
        taxonomy, _ = load_vocabulary(cfg.taxonomy, None)
        records, meta = agreement_records(Path(cfg.release), cfg.annotations)
        labels = label_space(taxonomy.codes("intent"), taxonomy.codes("function"), taxonomy.codes("response"))
        return records, meta, labels

    def plan(self, run: Run) -> Plan:
        records, _, labels = self._prepare()
        return Plan(self.name, [], [(f"compares {len(records)} label sets over {len(labels)} labels; "
                                    "agreement makes no model call")])

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        records, meta, labels = self._prepare()
        release = Path(cfg.release)
        dataset = {"release": str(release), "policies_sha256": file_sha256(release / "policies.jsonl"),
                   "annotations": cfg.annotations,
                   "annotations_sha256": file_sha256(resolve(cfg.annotations, "annotations.jsonl")),
                   "illustrative": bool(meta.get("illustrative")) or is_builtin(cfg.annotations)}
        return Execution(records=records, config=asdict(cfg), dataset=dataset, seeds={}, models=[],
                         extra={"kind": "agreement", "scoring": {"label_space": labels}})

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return agreement_metrics(records, manifest["scoring"]["label_space"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.release_report import agreement_report

        return agreement_report(dict(manifest), dict(metrics))

    def headline(self, metrics: Mapping[str, Any], records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.release_report import agreement_headline

        return agreement_headline(dict(manifest), dict(metrics))


def run_agreement(cfg: AgreementConfig) -> Path | Plan:
    return run_plural_command(AgreementCommand(cfg), cfg, "agreement")

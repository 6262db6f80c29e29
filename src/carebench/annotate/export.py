"""Writing a project's labels in the format its suite reads.

Raw practitioner labels and free-text notes are private (VEILED-SH, Ethical
Considerations: they are withheld from any release), so an export is written
owner-only (mode 0600) with a ``.meta.json`` sidecar saying so, and withdrawn
annotators' labels never appear in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from carebench.annotate import kinds
from carebench.annotate.store import Store
from carebench.fileio import atomic_write_text
from carebench.types import CarebenchError

#: which command reads each kind's export
READER = {
    "policy": "carebench plural calibrate",
    "review": "carebench construct review-stats",
    "criterion": "carebench support calibrate --labels",
    "rubric-walk": "carebench.datasets.walk_labels.load_walk_labels (clinician walks for judge calibration)",
}


@dataclass(frozen=True)
class ExportSummary:
    project: str
    kind: str
    rows: int
    skipped_left_out: int
    meta_path: Path


def export_project(store: Store, out: Path, project: str | None = None,
                   annotator: str | None = None) -> ExportSummary:
    if out.suffix.lower() != ".jsonl":
        raise CarebenchError(f"--out {out}: exports are JSONL; give a .jsonl file name")
    pid, name, kind = store.project(project)
    records = []
    left_out = 0
    for row in store.export_rows(pid, annotator):
        recs = kinds.export_records(kind, row)
        if not recs:
            left_out += 1
        records.extend(rec.model_dump_json() for rec in recs)
    atomic_write_text(out, "".join(r + "\n" for r in records), mode=0o600)
    meta = {
        "private": True,
        "contains": "raw human labels and free-text notes; do not release or share",
        "project": name,
        "kind": kind,
        "rows": len(records),
        "skipped_left_out": left_out,
        "annotator": annotator,
        "read_by": READER[kind],
    }
    meta_path = out.with_suffix(".meta.json")
    atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n", mode=0o600)
    return ExportSummary(name, kind, len(records), left_out, meta_path)

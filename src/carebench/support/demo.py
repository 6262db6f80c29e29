"""The support part of ``carebench demo``: the whole pipeline on the built-in tasks, offline.

One model (by default the embedded llama.cpp model) is the responder and all three
judge seats. A tiny model cannot support or judge a crisis conversation; the demo
exists to show every stage (regeneration, per-criterion judging, panel vote,
scoring, every analysis, report) running end to end without a network.
"""

from __future__ import annotations

from pathlib import Path

from carebench.engine.options import run_options
from carebench.models.base import parse_spec
from carebench.support.config import SupportRunConfig
from carebench.support.suite import run_support

#: Quick demo task: one two-turn conversation (8 criteria), so regeneration of every
#: assistant turn, per-criterion judging and the panel vote all run within the demo's
#: one-minute budget on two cores; --full runs every built-in task.
QUICK_TASKS = ("ill-selfworth-04",)
#: quick demo reply cap: a few sentences per turn (generated tokens are the demo's main cost)
QUICK_REPLY_TOKENS = 48
#: quick demo judge cap: ``{"met":true,"rationale":"`` is 8 SmolLM2 tokens, so 12 keeps the
#: verdict and the first words of the reason (a cut reason is counted as cut in the report)
QUICK_JUDGE_TOKENS = 12
DEMO_NOTE = (
    "Demonstration only: the same small embedded model wrote every reply and filled all three "
    "judge seats (at temperature 0 the three seats repeat one answer). Its scores demonstrate "
    "the pipeline and say nothing about crisis-support quality; use capable, calibrated judges "
    "(carebench support calibrate) for real measurements."
)


def run_demo(out_dir: Path, model_spec: str = "llamacpp:builtin", quick: bool = True) -> Path:
    """Run the support suite with ``model_spec`` as responder and judge panel; returns the run dir."""
    spec = parse_spec(model_spec)  # once, for the responder and every judge seat
    cfg = SupportRunConfig(
        tasks="builtin:sample",
        responders=[spec],
        judges=[spec] * 3,
        attempts=1 if quick else 3,
        include_reference=not quick,
        options=run_options(out=out_dir),
        max_tokens=QUICK_REPLY_TOKENS if quick else 400,
        # the verdict is the answer's first field: a short cap keeps it and cuts only the
        # rationale (counted as cut in the report), which keeps the quick demo within budget
        judge_max_tokens=QUICK_JUDGE_TOKENS if quick else 64,
        task_ids=list(QUICK_TASKS) if quick else None,
        bootstrap=500 if quick else 2000,
        title="Support suite demo (embedded model, illustrative tasks)",
        locale="en-US",  # the illustrative tasks have none: where replies send a person is checked for the US
        notes=[DEMO_NOTE],
    )
    result = run_support(cfg)
    assert isinstance(result, Path)
    return result

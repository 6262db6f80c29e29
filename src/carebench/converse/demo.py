"""The converse part of ``carebench demo``: two built-in personas, four turns, offline.

One model (by default the embedded llama.cpp model) plays the user, the chatbot and the
judge, and the judge walks carebench's smallest illustrative rubric (``builtin:demo``: two
dimensions, one question each; ``--full`` walks ``builtin:sample``). A 135M-parameter model
can do none of these jobs well; the part shows every stage (simulation, the tree walk,
scoring with intervals, the report) running end to end without a network.
"""

from __future__ import annotations

from pathlib import Path

from carebench.converse.suite import ConverseConfig, run_converse
from carebench.engine.options import run_options
from carebench.models.base import parse_spec

DEMO_PERSONAS = ("p-low-1", "p-imminent-1")
DEMO_NOTE = (
    "Demonstration only: the same small embedded model played the user, the chatbot and the judge, "
    "on carebench's illustrative rubric and personas. Its ratings demonstrate the pipeline and say "
    "nothing about any chatbot; use VERA-MH's rubric and capable judges for real measurements."
)


def run_demo(out_dir: Path, model_spec: str = "llamacpp:builtin", quick: bool = True) -> Path:
    from importlib import resources

    # quick: the time goes into llama.cpp prompt processing and generated tokens, so the
    # quick part keeps both small: one-line persona and judge prompts, the
    # two-question rubric, short replies, and the judge's answer without a reason (a walk
    # still records every question and answer). --full uses the regular prompts.
    prompts = resources.files("carebench.converse.prompts")
    spec = parse_spec(model_spec)  # once, for the simulator, the chatbot and the judge
    cfg = ConverseConfig(
        rubric="builtin:demo" if quick else "builtin:sample", personas="builtin:sample",
        persona_template=str(prompts.joinpath("persona_demo.txt")) if quick else None,
        judge_system=str(prompts.joinpath("judge_system_demo.txt")) if quick else None,
        judge_question=str(prompts.joinpath("judge_question_demo.txt")) if quick else None,
        persona_ids=list(DEMO_PERSONAS) if quick else None,
        simulators=[spec], chatbots=[spec], judges=[spec],
        turns=4 if quick else 8, max_tokens=16 if quick else 200, simulator_max_tokens=12 if quick else 120,
        judge_max_tokens=12 if quick else 80, judge_reasons=not quick, bootstrap=500 if quick else 2000,
        title="Converse suite demo (embedded model, illustrative rubric and personas)", notes=[DEMO_NOTE],
        locale="en-US",  # the sample personas have none: the chatbot's turns are checked for the US
        options=run_options(out=out_dir),
    )
    res = run_converse(cfg)
    assert isinstance(res, Path)
    return res

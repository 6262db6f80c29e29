"""A toy suite, plugged into carebench by one suite-table entry (:data:`ENTRY`).

It asks a model whether each of a few sentences names a colour and scores the share it
gets right; its comparer pairs two runs item by item. ``tests/test_suite_table.py``
adds :data:`ENTRY` to the table and runs, re-renders and compares it through the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from carebench.compare.measures import Measure, RunView, SystemView
from carebench.engine.options import RUN_FLAGS, RunOptions, run_flags
from carebench.engine.runner import Call
from carebench.engine.skeleton import Execution, Plan, echo_plan, read_records, run_suite, stage
from carebench.report import Paragraph, Report, Section
from carebench.suites import SuiteEntry
from carebench.types import ChatRequest, messages

SUITE = "toy"
COLOURS = ("red", "blue", "green", "yellow", "white", "black")
#: (id, sentence): twelve sentences, half of them naming a colour
ITEMS = [(f"i{n:02d}", text) for n, text in enumerate([
    "The sky was blue all day.", "She bought bread and milk.", "A red kite hung over the field.",
    "We walked to the station.", "His green scarf was new.", "The meeting ran late.",
    "Yellow leaves covered the path.", "They sang in the kitchen.", "The white cat slept.",
    "Rain fell on the roof.", "A black car stopped outside.", "The soup needed salt."])]


def gold(text: str) -> bool:
    return any(c in text.lower() for c in COLOURS)


class ToySuite:
    """The toy run on the skeleton: one call per sentence, one record per answer."""

    name = SUITE

    def __init__(self, model: str | None = None):
        self.model = model

    def _calls(self, run: Any) -> list[Call]:
        model = run.model(self.model)
        question = "Does this sentence name a colour? Answer yes or no.\n"
        return [Call(model, ChatRequest(messages(("user", question + text)), max_tokens=4), tag=item_id)
                for item_id, text in ITEMS]

    def plan(self, run: Any) -> Plan:
        return Plan(SUITE, [stage(run, "answers", self._calls(run))])

    def execute(self, run: Any) -> Execution:
        calls = self._calls(run)
        res = run.calls(calls, "toy answers", stage="answers")
        records = [{"id": item_id, "text": text, "model": self.model, "answer": comp.text.strip().lower(),
                    "gold": gold(text)}
                   for (item_id, text), comp in zip(ITEMS, res.completions, strict=True)]
        return Execution(records=records, config={"model": self.model},
                         dataset={"name": "toy", "items": len(ITEMS)}, seeds={})

    def read_records(self, run_dir: Path, manifest: Any) -> list[dict[str, Any]]:
        return read_records(run_dir)

    def score(self, records: list[dict[str, Any]], manifest: Any) -> dict[str, Any]:
        right = [(r["answer"] == "yes") == r["gold"] for r in records]
        return {"n": len(records), "correct": sum(right), "accuracy": sum(right) / len(right)}

    def render(self, metrics: Any, records: Any, manifest: Any) -> Report:
        return Report(title="Toy suite", sections=[Section("Accuracy", [Paragraph(
            f"{metrics['correct']} of {metrics['n']} sentences answered right ({metrics['accuracy']:.3f}).")])])


class ToyComparer:
    """The toy's part of ``carebench compare``: one system (the model), accuracy per item."""

    suite = SUITE
    unit = "item"
    leaderboard_measures = ("accuracy",)

    def read(self, run_dir: Path, manifest: Any) -> RunView:
        recs = read_records(run_dir)
        right = np.array([float((r["answer"] == "yes") == r["gold"]) for r in recs])
        name = recs[0]["model"]
        system = SystemView(name, [r["id"] for r in recs],
                            {"accuracy": Measure.ratio("accuracy", "accuracy", right, np.ones_like(right))},
                            model=name)
        return RunView(SUITE, Path(run_dir), dict(manifest), {name: system},
                       keys={"items": sorted(r["id"] for r in recs)}, unit="item")

    def drilldown(self, base: RunView, candidate: RunView, pairs: Any, limit: int) -> list:
        return []


app = typer.Typer(help="A toy suite (tests).", no_args_is_help=True)


@app.command()
@run_flags()
def run(model: Annotated[str, typer.Option(help="Model spec.")], options: RunOptions = RUN_FLAGS) -> None:
    """Ask the model about every sentence, score and report."""
    result = run_suite(ToySuite(model), options)
    if isinstance(result, Plan):
        echo_plan(result)
        return
    typer.echo(f"wrote {result}")


ENTRY = SuiteEntry("a toy suite (tests)", app="toy.toy_suite:app", kinds={None: "toy.toy_suite:ToySuite"},
                   comparer="toy.toy_suite:ToyComparer", pair_option="--system",
                   pair_help="pair BASE=CANDIDATE models", gates=("accuracy",))

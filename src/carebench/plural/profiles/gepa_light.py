"""E3: instruction-only optimisation with GEPA (VEILED-SH, Appendix B.2).

Uses the ``gepa`` package's ``optimize`` with a custom adapter, so every
evaluation and every reflection is a carebench call through the command's run
context (cached, budgeted, recorded). Per compile: a budget of 40 metric calls (one
metric call = one case labelled with one candidate instruction), the fold's
calibration cases as both training and validation set (GEPA's default when no
separate validation set is given), the reflection model's output capped at 8,000
tokens, and only the instruction evolves (rubric, decoding and model are fixed).
The per-case score is the example F1 between the predicted and the
practitioner's complete label sets; a failed parse scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carebench.engine.runner import Call
from carebench.plural.policy import example_f1
from carebench.plural.profiles.base import Env, FitData, Profile, new_profile, stable_seed
from carebench.plural.profiles.prompted import predict_with
from carebench.plural.prompting import (
    DEFAULT_INSTRUCTION,
    TEMPERATURE,
    ProfilePrediction,
    format_labels,
    label_request,
)
from carebench.plural.runs import CutShort
from carebench.types import CarebenchError, ChatRequest, Message

METRIC_CALLS = 40
REFLECTION_MAX_TOKENS = 8000
MINIBATCH = 3
COMPONENT = "instruction"


def _gepa() -> Any:
    try:
        import gepa
    except ImportError:
        raise CarebenchError("method E3 needs the gepa package: pip install 'carebench[plural]'") from None
    return gepa


class _Silent:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, *args: Any, **kwargs: Any) -> None:
        self.lines.append(" ".join(str(a) for a in args))


class LabelAdapter:
    """GEPA adapter: evaluate a candidate instruction on fold cases through the run context."""

    propose_new_texts = None  # GEPA's own reflective proposal, with our reflection model

    def __init__(self, env: Env, d: FitData) -> None:
        self.env, self.d = env, d
        self.metric_calls = 0

    def evaluate(self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False):
        gepa = _gepa()
        env = self.env
        reqs = [label_request(env.taxonomy, env.contexts, env.prompts[c], instruction=candidate[COMPONENT])
                for c in batch]
        preds = env.predict_requests(reqs, "full", "E3 evaluations")
        self.metric_calls += len(batch)
        scores = [example_f1(self.d.gold[c].labels(), p.labels() if p.ok else None) for c, p in zip(batch, preds, strict=True)]
        traj = [{"case": c, "prediction": p} for c, p in zip(batch, preds, strict=True)] if capture_traces else None
        return gepa.EvaluationBatch(outputs=[p.to_dict() for p in preds], scores=scores, trajectories=traj)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        rows = []
        for t, score in zip(eval_batch.trajectories or [], eval_batch.scores, strict=False):
            cid, pred = t["case"], t["prediction"]
            gold = self.d.gold[cid]
            if pred.ok:
                missing = sorted(gold.labels() - pred.labels())
                extra = sorted(pred.labels() - gold.labels())
                fb = (f"Score {score:.2f}. The practitioner's labels: {format_labels(gold)}. "
                      f"Missed: {', '.join(missing) or 'none'}. Not wanted: {', '.join(extra) or 'none'}.")
                out = format_labels(pred.policy)
            else:
                fb = f"Score 0: the answer failed ({pred.error}). The practitioner's labels: {format_labels(gold)}."
                out = pred.raw[:500]
            if self.d.notes.get(cid):
                fb += f" Practitioner's note: {self.d.notes[cid]}"
            rows.append({"Inputs": self.env.prompts[cid].text, "Generated Outputs": out, "Feedback": fb})
        return {c: rows for c in components_to_update}


def reflection_lm(env: Env, failures: list[Exception]):
    """GEPA's reflection model: the shared judge through the run context, output capped at
    8,000 tokens.

    GEPA logs and skips a failing reflection; a budget stop or failed call is kept in
    ``failures`` so the compile stops instead of quietly fitting with fewer rounds.
    """

    def call(prompt: str | list[dict[str, Any]]) -> str:
        msgs = ((Message("user", prompt),) if isinstance(prompt, str)
                else tuple(Message(m["role"], m["content"]) for m in prompt))
        req = ChatRequest(messages=msgs, temperature=TEMPERATURE, max_tokens=REFLECTION_MAX_TOKENS)
        try:
            (comp,) = env.ask([Call(env.model, req, tag={"stage": "E3 reflection"})], "E3 reflection")
        except (CarebenchError, CutShort) as e:
            failures.append(e)
            raise
        return comp.text

    return call


class GepaLight:
    name = "E3"
    title = "instruction optimisation (GEPA)"
    freezable = True

    def __init__(self, metric_calls: int = METRIC_CALLS) -> None:
        self.metric_calls = metric_calls

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        gepa = _gepa()
        out = []
        for d in data:
            adapter = LabelAdapter(env, d)
            log = _Silent()
            ids = [c.id for c in d.cases]
            failures: list[Exception] = []
            result = gepa.optimize(
                seed_candidate={COMPONENT: DEFAULT_INSTRUCTION},
                trainset=ids, valset=ids, adapter=adapter, reflection_lm=reflection_lm(env, failures),
                reflection_minibatch_size=MINIBATCH, max_metric_calls=self.metric_calls,
                seed=stable_seed(env.seed, "E3", d.practitioner, d.fold) % (2**31),
                logger=log, display_progress_bar=False, raise_on_exception=True,
            )
            if failures:
                raise failures[0]
            best = result.best_candidate[COMPONENT]
            out.append(new_profile(self.name, d, env, best, extra={
                "metric_calls": adapter.metric_calls, "candidates": len(result.candidates),
                "best_val_score": float(result.val_aggregate_scores[result.best_idx]),
                "gepa_warnings": [line for line in log.lines if "failed" in line.lower()][:5],
            }))
        return out

    def predict(self, jobs, env: Env) -> list[list[ProfilePrediction]]:
        return predict_with(
            env, jobs,
            lambda pr, p: label_request(env.taxonomy, env.contexts, p, instruction=pr.instruction),
            "E3 predictions",
        )

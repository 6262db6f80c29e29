"""E4/E5's optional backend: guidelines distilled by MLflow's ``MemAlignOptimizer``.

VEILED-SH (Appendix B.2) distils each E4 judge's memory with MLflow's
MemAlignOptimizer. ``--memalign-backend mlflow`` does that: each fit's calibration
cases become in-memory MLflow traces carrying the practitioner's labels (and note) as
human feedback, and ``MemAlignOptimizer.align`` distils the semantic memory
(guidelines). The episodic memory is the fit's labelled cases, as in the native
backend, and prediction is carebench's own (rubric + guidelines + the 5 most similar
cases over the shared embedder), so a frozen profile labels without MLflow installed.

MLflow reaches models through DSPy and LiteLLM by URL only, so every call it makes
goes to a loopback endpoint (:mod:`carebench.models.loopback`) that answers through
the run context: cached, budgeted, in ``calls.jsonl``. Its embedding requests are
answered by the run's embedder. While it runs, MLflow telemetry is off, LiteLLM stays
offline, DSPy's own cache is off, tracking points into a temporary directory that is
removed afterwards, and the OpenAI variables point at the loopback endpoint (and are
restored).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from carebench.engine.runner import Call
from carebench.plural.profiles.base import Env, FitData
from carebench.plural.prompting import (
    DEFAULT_INSTRUCTION,
    MAX_TOKENS,
    TEMPERATURE,
    PromptStage,
    case_text,
    format_labels,
    rubric_text,
)
from carebench.types import CarebenchError

BACKENDS = ("native", "mlflow")
INSTALL_HINT = "pip install 'carebench[mlflow]'"
JUDGE_NAME = "practitioner_policy"
CHAT_MODEL = "carebench-judge"  # names the loopback endpoint's models; never leaves the machine
EMBED_MODEL = "carebench-embedder"

_TRACE_PREFIX = "tr-"


def check_backend(name: str | None, needed: bool = True) -> str:
    """The backend name, validated; when it will be used, ``mlflow`` must also import."""
    name = (name or "native").lower()
    if name not in BACKENDS:
        raise CarebenchError(f"unknown --memalign-backend {name!r} (choose from {', '.join(BACKENDS)})")
    if name == "mlflow" and needed:
        _modules()
    return name


#: set before MLflow, LiteLLM and DSPy are imported (each reads them at import)
OFFLINE_ENVIRONMENT = {
    "MLFLOW_DISABLE_TELEMETRY": "true",  # MLflow's usage telemetry
    "DO_NOT_TRACK": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no cost-map download at import
    "LITELLM_OFFLINE_MODE": "true",
}


@functools.cache
def _modules() -> dict[str, Any]:
    """MLflow's MemAlign pieces, imported once with telemetry and downloads off."""
    os.environ.update(OFFLINE_ENVIRONMENT)
    os.environ.setdefault("TQDM_DISABLE", "1")  # MLflow's progress bars on stderr
    # DSPy opens its disk cache at import; it is switched off below, so point it at a temp dir
    os.environ.setdefault("DSPY_CACHEDIR", os.path.join(tempfile.gettempdir(), "carebench-dspy-cache"))
    try:
        import dspy
        import mlflow
        from mlflow import entities
        from mlflow.entities.span import create_mlflow_span
        from mlflow.genai.judges import make_judge
        from mlflow.genai.judges.optimizers import MemAlignOptimizer
        from mlflow.telemetry.client import set_telemetry_client
        from mlflow.tracing.constant import SpanAttributeKey
        from mlflow.tracing.utils import build_otel_context
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
    except ImportError as e:
        raise CarebenchError(
            f"--memalign-backend mlflow needs MLflow's MemAlignOptimizer and DSPy ({e.msg}): {INSTALL_HINT}"
        ) from None
    set_telemetry_client()  # re-reads the switch in case MLflow was imported earlier
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)  # the run's cache only
    return {
        "mlflow": mlflow, "dspy": dspy, "entities": entities, "create_mlflow_span": create_mlflow_span,
        "make_judge": make_judge, "MemAlignOptimizer": MemAlignOptimizer, "SpanAttributeKey": SpanAttributeKey,
        "build_otel_context": build_otel_context, "Resource": Resource, "ReadableSpan": ReadableSpan,
    }


def versions() -> dict[str, str]:
    m = _modules()
    return {"mlflow": m["mlflow"].__version__, "dspy": m["dspy"].__version__}


@dataclass
class _Session:
    endpoint: Any
    tmp: str
    errors: list[str] = field(default_factory=list)

    def raise_failures(self) -> None:
        """A failed or budget-stopped call inside MLflow stops the command (never hidden)."""
        if self.endpoint.failures:
            raise self.endpoint.failures[0]


class _ErrorLog(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage().splitlines()[0][:300])


@contextlib.contextmanager
def session(env: Env) -> Iterator[_Session]:
    """The loopback endpoint and the scoped environment MLflow runs in."""
    from carebench.models.loopback import LoopbackEndpoint

    _modules()

    def chat(req):
        return env.ask([Call(env.model, req, tag={"stage": "distill-mlflow"})],
                       "guideline distillation (MLflow MemAlign)")[0]

    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="carebench-mlflow-"))
        ep = stack.enter_context(LoopbackEndpoint(chat, env.embed_texts, temperature=TEMPERATURE,
                                                  max_tokens=MAX_TOKENS))
        scoped = {
            "OPENAI_API_BASE": ep.base_url, "OPENAI_BASE_URL": ep.base_url,
            "OPENAI_API_KEY": "carebench-loopback",  # a real key must not reach even the loopback
            "MLFLOW_TRACKING_URI": "file://" + os.path.join(tmp, "mlruns"),
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        }
        saved = {k: os.environ.get(k) for k in scoped}
        os.environ.update(scoped)
        stack.callback(_restore, saved)
        s = _Session(ep, tmp)
        handler = _ErrorLog(s.errors)
        # MLflow's log lines stay out of the user's terminal (a stop is reported once, by
        # carebench); its errors are recorded for the profile instead
        log = logging.getLogger("mlflow")
        old = log.handlers[:], log.level, log.propagate
        log.handlers, log.propagate = [handler], False
        log.setLevel(logging.ERROR)
        stack.callback(lambda: (setattr(log, "handlers", old[0]), log.setLevel(old[1]),
                                setattr(log, "propagate", old[2])))
        yield s


def _restore(saved: dict[str, str | None]) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def trace_id(case_id: str) -> str:
    return _TRACE_PREFIX + hashlib.sha256(case_id.encode()).hexdigest()[:32]


def _trace(m: dict[str, Any], case_id: str, text: str, labels: str, note: str, practitioner: str) -> Any:
    """One calibration case as an in-memory MLflow trace with the practitioner's feedback."""
    e, tid = m["entities"], trace_id(case_id)
    otel = m["ReadableSpan"](
        name="calibration_case", context=m["build_otel_context"](int(tid[len(_TRACE_PREFIX):], 16), 1),
        parent=None, start_time=0, end_time=1, resource=m["Resource"].get_empty(),
        attributes={m["SpanAttributeKey"].REQUEST_ID: json.dumps(tid),
                    m["SpanAttributeKey"].INPUTS: json.dumps(text)},
    )
    feedback = e.Feedback(
        name=JUDGE_NAME, value=labels, rationale=note or None, trace_id=tid,
        source=e.AssessmentSource(source_type=e.AssessmentSourceType.HUMAN, source_id=practitioner),
    )
    info = e.TraceInfo(trace_id=tid, trace_location=e.TraceLocation.from_experiment_id("0"),
                       request_time=0, state=e.TraceState.OK, assessments=[feedback])
    return e.Trace(info=info, data=e.TraceData(spans=[m["create_mlflow_span"](otel, tid)]))


def judge_instructions(env: Env, stage: PromptStage) -> str:
    return (f"{DEFAULT_INSTRUCTION}\n\n{rubric_text(env.taxonomy, stage)}\n\n"
            "The case to label: {{ inputs }}")


def align(env: Env, s: _Session, d: FitData, stage: PromptStage) -> tuple[list[str], list[list[str]], str | None]:
    """MLflow's MemAlign on one fit: (guidelines, the case ids each came from, error)."""
    m = _modules()
    uri = f"openai:/{CHAT_MODEL}"
    judge = m["make_judge"](name=JUDGE_NAME, instructions=judge_instructions(env, stage),
                            feedback_value_type=str, model=uri)
    traces = [_trace(m, c.id, case_text(c, env.contexts), format_labels(d.gold[c.id], stage),
                     d.notes.get(c.id, ""), d.practitioner) for c in d.cases]
    by_trace = {trace_id(c.id): c.id for c in d.cases}
    optimizer = m["MemAlignOptimizer"](reflection_lm=uri, retrieval_k=5, embedding_model=f"openai:/{EMBED_MODEL}")
    before = len(s.errors)
    try:
        aligned = optimizer.align(judge, traces)
    except Exception as e:  # noqa: BLE001 - MLflow wraps everything in MlflowException
        s.raise_failures()
        raise CarebenchError(f"MLflow MemAlign failed for {d.practitioner}: {str(e).splitlines()[0]}") from None
    s.raise_failures()
    memory = aligned.model_dump()["memory_augmented_judge_data"]
    guidelines = [g["guideline_text"] for g in memory["semantic_memory"]]
    sources = [sorted(by_trace.get(t, str(t)) for t in (g.get("source_trace_ids") or []))
               for g in memory["semantic_memory"]]
    err = None
    if not guidelines:
        err = "MLflow distilled no guideline" + (f" ({s.errors[before]})" if len(s.errors) > before else "")
    return guidelines, sources, err


def distill(env: Env, data: Sequence[FitData], stage: PromptStage) -> list[tuple[list[str], list[list[str]], str | None]]:
    """Guidelines for each fit through MLflow (one alignment each, one call per 50 cases)."""
    with session(env) as s:
        return [align(env, s, d, stage) for d in data]

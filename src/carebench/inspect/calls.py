"""carebench's call loops on Inspect's model API: a stand-in for a run's ``calls``.

A suite's multi-call loops (converse's conversation generation and rubric walk) are written
against a carebench run: they hand ``run.calls(...)`` a batch of :class:`~carebench.engine.runner.Call`
objects and read back one :class:`~carebench.types.Completion` per call. Under ``inspect eval``
the same loops run unchanged in a worker thread (:func:`run_in_thread`), with
:class:`InspectCalls` in place of the run: each call is sent to the Inspect model its
:class:`InspectModel` names (the evaluated model, or a model role such as ``user`` or
``judge``) with the request's own decoding settings, on Inspect's event loop and in the
sample's context, so Inspect's retries, limits, cache and transcript apply to it and
carebench's budget and cache do not. A call Inspect gives up on raises, which ends the
sample with an error: it is never read as the model's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from carebench.engine.runner import Call, RunResult
from carebench.inspect.bridge import chat_messages, completion_of, generate_options
from carebench.types import Completion

T = TypeVar("T")


@dataclass(frozen=True)
class InspectModel:
    """Stands in for a carebench model: ``spec`` is the name records carry, ``role`` the
    Inspect model role the calls go to (None: the evaluated model)."""

    spec: str
    role: str | None = None

    def __str__(self) -> str:
        return self.spec


class InspectCalls:
    """What carebench's call loops use of a run (``calls`` and ``stopped``), on Inspect's API.

    Only usable from the worker thread :func:`run_in_thread` starts: every batch is sent
    back to Inspect's event loop and waited for there."""

    #: Inspect enforces its own limits; nothing here stops a loop early
    stopped: str | None = None

    def calls(self, calls: Sequence[Call], description: str = "", stage: str | None = None) -> RunResult:
        """One completion per call, in order (the calls of a batch are sent concurrently)."""
        import anyio.from_thread

        return RunResult(completions=list(anyio.from_thread.run(_batch, list(calls))), calls=list(calls))


async def _batch(calls: list[Call]) -> list[Completion]:
    import anyio

    out: list[Completion | None] = [None] * len(calls)

    async def one(i: int, call: Call) -> None:
        out[i] = await complete(call)

    async with anyio.create_task_group() as tg:
        for i, c in enumerate(calls):
            tg.start_soon(one, i, c)
    return out  # type: ignore[return-value]


async def complete(call: Call) -> Completion:
    """One carebench call on the Inspect model its :class:`InspectModel` names."""
    from inspect_ai.model import GenerateConfig, get_model

    role = getattr(call.model, "role", None)
    model = get_model(role=role, required=True) if role else get_model()
    output = await model.generate(chat_messages(call.request.messages),
                                  config=GenerateConfig(**generate_options(call.request)))
    return completion_of(output, model=str(model))


async def run_in_thread(loop: Callable[..., T], *args: Any) -> T:
    """``loop(InspectCalls(), *args)`` in a worker thread, its calls made on this event loop
    (the thread carries the sample's context, so model roles and the transcript resolve)."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(lambda: loop(InspectCalls(), *args))

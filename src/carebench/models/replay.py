"""``replay:PATH[::MODEL_SPEC]``: answers from recorded completions, never invented ones.

PATH is a run directory (its ``calls.jsonl``) or a JSONL file whose lines hold either
the runner's call records ``{"model", "request": {...}, "completion": {...}}`` or a
hand-written ``{"messages": [...], "text": "...", "attempt": 0}``. A request is matched
on its messages and attempt index (sampling parameters are not part of the match);
an unrecorded request is a permanent error for that call.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from carebench.datasets.files import read_rows
from carebench.models.base import ModelSpec, PermanentError
from carebench.types import CarebenchError, ChatRequest, Completion


def replay_key(messages: list[dict[str, str]], attempt: int) -> str:
    blob = json.dumps(
        [[m["role"], m["content"]] for m in messages] + [attempt], ensure_ascii=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ReplayModel:
    default_concurrency = 64

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        path_s, _, only_model = spec.model.partition("::")
        path = Path(path_s)
        if path.is_dir():
            path = path / "calls.jsonl"
        if not path.is_file():
            raise CarebenchError(f"replay recording not found: {path}")
        self._answers: dict[str, Completion] = {}
        ambiguous: set[str] = set()
        owner: dict[str, str] = {}
        for loc, rec in read_rows(path, "jsonl"):
            try:
                if "request" in rec:
                    msgs = rec["request"]["messages"]
                    attempt = int(rec["request"].get("attempt", 0))
                    comp = Completion.from_dict(rec["completion"])
                    model = rec.get("model", "")
                else:
                    msgs = rec["messages"]
                    attempt = int(rec.get("attempt", 0))
                    comp = Completion.from_dict(rec)
                    model = rec.get("model", "")
            except (ValueError, KeyError, TypeError) as e:
                raise CarebenchError(f"{path}: {loc}: not a recorded completion ({e})") from None
            if only_model and model != only_model:
                continue
            if comp.error is not None:
                continue
            # the recorded run's wait (not read back by from_dict: a cached answer waited for
            # nothing), so a replay reproduces the recording's timing figures as its latency
            # (none recorded: the recorded run had it from its cache and waited for nothing)
            comp.queue_wait_s = (rec["completion"] if "request" in rec else rec).get("queue_wait_s") or 0.0
            k = replay_key(msgs, attempt)
            if k in owner and owner[k] != model:
                ambiguous.add(k)
            owner[k] = model
            self._answers[k] = comp
        if ambiguous:
            models = sorted({owner[k] for k in ambiguous})
            raise CarebenchError(
                f"{path}: {len(ambiguous)} requests were answered by several models; "
                f"name one as replay:{path_s}::MODEL (e.g. {models[0]})"
            )

    async def complete(self, request: ChatRequest) -> Completion:
        k = replay_key([m.to_dict() for m in request.messages], request.attempt)
        rec = self._answers.get(k)
        if rec is None:
            raise PermanentError("replay: no recorded completion for this request")
        comp = Completion.from_dict(rec.to_dict() | {"model": str(self.spec)})
        comp.queue_wait_s = rec.queue_wait_s
        return comp

    async def aclose(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._answers)

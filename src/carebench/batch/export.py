"""The batch sink: calls the cache cannot answer are collected here instead of being
sent, and written to ``DIR`` as one round of request files when the command ends.

The runner hands a call to :meth:`BatchSink.add` where it would call the provider
(``Runner._provider_call``), so every suite and stage gets batch mode through the
run context alone. A round is written into a hidden temporary directory, renamed
into place when complete, and only then listed in ``manifest.json`` (written last):
a kill leaves either a complete, listed round or one the next run replaces.
Identical requests are written once, and a request still waiting in an earlier
round is not written again.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from carebench.batch.formats import body_builder, file_format, request_line
from carebench.batch.manifest import Manifest
from carebench.batch.options import BatchOptions
from carebench.engine.runner import BATCH_PENDING  # noqa: F401 - the reason calls wait, for callers
from carebench.models.anthropic_native import ANTHROPIC_VERSION
from carebench.types import CarebenchError, ChatRequest, RunStopped


class BatchSink:
    """Collects one command's pending calls (see the module docstring)."""

    def __init__(self, options: BatchOptions):
        self.options = options
        self.dir = Path(options.dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise CarebenchError(f"--batch {self.dir}: not a directory")
        self._manifest: Manifest | None = None
        self._formats: dict[int, str | None] = {}  # id(model) -> its file format
        #: key -> (format, model, request) of the requests this round writes
        self.calls: dict[str, tuple[str, Any, ChatRequest]] = {}
        #: keys still waiting for results from an earlier round (not written again)
        self.awaiting: set[str] = set()
        self._outstanding: set[str] | None = None

    @property
    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = Manifest.load(self.dir)
        return self._manifest

    # -- the runner's seam -------------------------------------------------------------
    def add(self, call: Any, key: str) -> bool:
        """Take a call the cache cannot answer; False if its model is called live instead."""
        model = call.model
        fmt = self._formats.get(id(model), "?")
        if fmt == "?":
            fmt = self._formats[id(model)] = file_format(model.spec, self.options.format)
        if fmt is None:
            return False
        calls = self.calls
        if key in calls or key in self.awaiting:
            return True
        if key in (self._outstanding if self._outstanding is not None else self._outstanding_keys()):
            self.awaiting.add(key)
            return True
        calls[key] = (fmt, model, call.request)
        return True

    def worst_usd(self) -> float:
        """The round's worst case at batch prices (each request's prompt and output cap)."""
        from carebench.models.pricing import calls_cost_bound

        by_model: dict[int, tuple[Any, list[ChatRequest]]] = {}
        for _, m, r in self.calls.values():
            group = by_model.get(id(m))
            if group is None:
                group = by_model[id(m)] = (m, [])
            group[1].append(r)
        total = 0.0
        for m, requests in by_model.values():
            opts = getattr(m, "request_options", None)  # as runner.capped_request
            total += calls_cost_bound(m.spec, requests, None if opts is None else opts.max_tokens, batch=True)
        return total

    def committed(self, cache: Any) -> tuple[float, float, int]:
        """What the directory's earlier rounds have committed of the budget: (the batch cost
        of the answers imported for their requests, the worst case of the rounds that still
        wait for results, how many rounds wait). An answer counts in the latest round that
        holds its request; a request with a recorded error (written again later) or answered
        live counts nothing there. A round every request of which has a result is settled
        in the manifest (``answers_usd``); a round still waiting for some counts its
        answers so far plus its whole worst case (a bound: its unanswered requests' worst
        cases are part of it)."""
        m = self.manifest
        ids: dict[int, list[str]] = {}
        latest: dict[str, int] = {}
        for rnd, entry in m.files():
            got = m.ids(entry)
            ids.setdefault(rnd, []).extend(got)
            for cid in got:
                latest[cid] = rnd
        errored = m.errored()
        answered = waiting = 0.0
        rounds_waiting = 0
        for r in m.rounds:
            rnd = r["round"]
            if r.get("settled"):
                answered += r.get("answers_usd") or 0.0
                continue
            mine = [cid for cid in ids.get(rnd, ()) if latest[cid] == rnd]
            costs = cache.batch_costs(mine) if cache is not None else {}
            spent = sum(costs.values())
            answered += spent
            if all(cid in costs or errored.get(cid, 0) >= rnd for cid in mine):
                r["answers_usd"], r["settled"] = spent, True  # saved with the next round
            else:
                waiting += r.get("worst_case_usd") or 0.0
                rounds_waiting += 1
        return answered, waiting, rounds_waiting

    @property
    def pending(self) -> int:
        return len(self.calls) + len(self.awaiting)

    def _outstanding_keys(self) -> set[str]:
        """Keys in earlier rounds with no result yet (a recorded error releases a key)."""
        if self._outstanding is None:
            m = self.manifest
            errored = m.errored()
            self._outstanding = {k for k, (rnd, _) in m.index().items() if errored.get(k, 0) < rnd}
        return self._outstanding

    # -- the end of the command --------------------------------------------------------
    def write(self, command: list[str] | None = None, budget: float | None = None, spent_live: float = 0.0,
              on_file: Callable[[Path], None] | None = None, cache: Any = None) -> str:
        """Write this round (manifest last) and return the one line that says what waits.
        ``budget`` caps the whole batch directory: this round is written only if what the
        command spent live, what earlier rounds committed (:meth:`committed`, from
        ``cache``) and the round's own worst case fit in it together; else RunStopped
        (exit 3), writing nothing. ``on_file`` is called after each file is complete (tests
        use it to kill an export midway)."""
        worst = self.worst_usd()
        if budget is not None and self.calls:
            answered, waiting, n_waiting = self.committed(cache)
            need = spent_live + answered + waiting + worst
            if need > budget + 1e-9:
                self._manifest = None  # drop the settlements computed for this check: nothing is written
                also = [f"${answered:.2f} of answers already imported for {self.dir}"] if answered else []
                if waiting:
                    also.append(f"${waiting:.2f} worst case of {n_waiting} earlier round{'s' * (n_waiting != 1)} "
                                "still waiting for results")
                if spent_live:
                    also.append(f"${spent_live:.2f} spent live by this command")
                raise RunStopped(
                    f"batch round not written: its worst case at batch prices (${worst:.2f} for "
                    f"{len(self.calls)} requests){' with ' + ' and '.join(also) if also else ''} would pass "
                    f"the budget (${budget:.2f}, a cap on the whole batch directory); nothing was written; "
                    f"re-run with --budget {math.ceil(need * 100 - 1e-6) / 100:.2f} or more to go on")
        if not self.calls:
            return (f"0 new requests; {len(self.awaiting)} requests of earlier rounds in {self.dir} still "
                    f"wait for results: fetch or import them (carebench batch fetch {self.dir}), then "
                    "re-run the same command")
        m = self.manifest
        rnd = max((r["round"] for r in m.rounds), default=0) + 1
        name = f"round-{rnd:03d}"
        final = self.dir / name
        tmp = self.dir / f".{name}.tmp"
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in (tmp, final):  # a round a killed export left unlisted
            if stale.exists():
                shutil.rmtree(stale)
        tmp.mkdir()
        entries = write_files(tmp, name, self.calls, self.options.limits, on_file)
        tmp.rename(final)
        m.rounds.append({"round": rnd, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "command": list(command) if command is not None else command_line(),
                         "requests": len(self.calls), "awaiting_earlier": len(self.awaiting),
                         "worst_case_usd": worst, "files": entries})
        m.save()
        k = len(entries)
        more = f" (and {len(self.awaiting)} of earlier rounds still waiting)" if self.awaiting else ""
        return (f"{len(self.calls)} requests in {k} file{'s' * (k != 1)} pending in {self.dir} (round {rnd}){more}; "
                f"submit them with 'carebench batch submit {self.dir}' (vLLM: vllm run-batch, see "
                f"docs/batch.md), load results with 'carebench batch fetch {self.dir}' or 'carebench batch "
                "import', then re-run the same command to resume")


def command_line() -> list[str]:
    """The carebench command being run (as typed; the CLI records it)."""
    from carebench.batch import options

    return ["carebench", *options.COMMAND_LINE] if options.COMMAND_LINE else list(sys.argv)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "model"


_ENDPOINT_NAME = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings", "/v1/messages": "messages"}


def write_files(tmp: Path, round_name: str, calls: dict[str, tuple[str, Any, ChatRequest]],
                limits: dict[str, tuple[int, int]],
                on_file: Callable[[Path], None] | None = None) -> list[dict[str, Any]]:
    """The request files of one round, grouped by format, model and endpoint and split at
    the format's limits; returns their manifest entries."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    #: (format, spec, endpoint) -> the keys and encoded lines of its requests, in order
    groups: dict[tuple[str, str, str], tuple[list[str], list[bytes]]] = {}
    models: dict[str, Any] = {}
    builders: dict[int, tuple[str, Callable[[ChatRequest], tuple[str, dict[str, Any]]]]] = {}
    for key, (fmt, model, request) in calls.items():
        got = builders.get(id(model))
        if got is None:
            spec = str(model.spec)
            got = builders[id(model)] = (spec, body_builder(model))
            models[spec] = model
        spec, build = got
        endpoint, body = build(request)
        group = groups.get((fmt, spec, endpoint))
        if group is None:
            group = groups[(fmt, spec, endpoint)] = ([], [])
        group[0].append(key)
        group[1].append((dumps(request_line(fmt, key, endpoint, body)) + "\n").encode("utf-8"))
    entries: list[dict[str, Any]] = []
    for (fmt, spec, endpoint), (keys, lines) in sorted(groups.items(), key=lambda kv: kv[0]):
        max_n, max_bytes = limits[fmt]
        model = models[spec]
        base = f"{fmt}--{_slug(model.spec.model)}--{_ENDPOINT_NAME.get(endpoint, 'calls')}"
        part, i = 0, 0
        while i < len(lines):
            part += 1
            fname = f"{base}--{part:03d}"
            path = tmp / f"{fname}.jsonl"
            j = min(i + max_n, len(lines))
            size = sum(map(len, lines[i:j]))
            if size > max_bytes:  # split at the size limit: the longest run of lines that fits
                fit = bisect.bisect_right(list(itertools.accumulate(map(len, lines[i:j]))), max_bytes)
                if fit == 0:
                    raise CarebenchError(f"one {fmt} request for {spec} is larger than the "
                                         f"{max_bytes} byte file limit")
                j = i + fit
                size = sum(map(len, lines[i:j]))
            data = b"".join(lines[i:j])
            with path.open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            ids = keys[i:j]
            (tmp / f"{fname}.ids").write_text("\n".join(ids) + "\n", "ascii")
            entries.append({"path": f"{round_name}/{fname}.jsonl", "ids": f"{round_name}/{fname}.ids",
                            "format": fmt, "provider": model.spec.provider, "endpoint": endpoint,
                            "model": spec, "base_url": model.spec.base_url, "requests": j - i,
                            "bytes": size, "sha256": hashlib.sha256(data).hexdigest(),
                            **({"api_version": ANTHROPIC_VERSION} if fmt == "anthropic" else {})})
            i = j
            if on_file is not None:
                on_file(path)
    return entries

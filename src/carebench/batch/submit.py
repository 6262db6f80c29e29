"""``carebench batch submit|status|fetch DIR`` through the official ``openai`` and
``anthropic`` SDKs (the optional ``batch`` extra).

Keys come from the environment (``OPENAI_API_KEY``, or ``CAREBENCH_API_KEY`` for an
``openai:MODEL@URL`` server; ``ANTHROPIC_API_KEY``) and are never written. Every step
is recorded in ``DIR/manifest.json`` as soon as it happens (uploaded file id, then a
``creating`` mark, then the batch id), so an interrupted submit resumes without
submitting a file twice: a batch created just before a kill is found again by the
file's SHA-256 in its metadata (OpenAI) or by its creation time and size (Anthropic).
``fetch`` downloads the results of finished batches to ``DIR/results/`` (atomically)
and imports them; a request a finished batch has no result for is recorded as an
error, so the next round writes it again. vLLM request files are run with
``vllm run-batch`` instead (docs/batch.md) and imported with ``carebench batch import``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.batch.manifest import Manifest
from carebench.fileio import atomic_write_bytes
from carebench.types import CarebenchError

OPENAI_DONE = ("completed", "failed", "expired", "cancelled")
SUBMITTABLE = ("openai", "anthropic")


def _sdk(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise CarebenchError(f"the {name} package is needed to submit batches: "
                             "pip install 'carebench[batch]'") from None


_CLIENTS: dict[tuple[str, str | None, str | None], Any] = {}


def _client(kind: str, base: str | None, key: str | None, make: Any) -> Any:
    """One SDK client per provider, server and key for the process (building one takes
    a quarter of a second, and status is polled many times)."""
    k = (kind, base, key)
    if k not in _CLIENTS:
        _CLIENTS[k] = make()
    return _CLIENTS[k]


def openai_client(entry: dict[str, Any]) -> Any:
    base = entry.get("base_url")
    key = os.environ.get("OPENAI_API_KEY") if base is None else (
        os.environ.get("CAREBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY"))
    if not key and base is None:
        raise CarebenchError(f"OPENAI_API_KEY is not set (needed to submit {entry['path']})")
    return _client("openai", base, key, lambda: _sdk("openai").OpenAI(
        api_key=key or "none", base_url=base, max_retries=3))


def anthropic_client(entry: dict[str, Any]) -> Any:
    """The SDK client for an Anthropic file, speaking the API version its requests were
    built for (recorded in the manifest; the SDK's own default is another version)."""
    from carebench.models.anthropic_native import ANTHROPIC_VERSION

    base = entry.get("base_url")
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key and base is None:
        raise CarebenchError(f"ANTHROPIC_API_KEY is not set (needed to submit {entry['path']})")
    root = base[: -len("/v1")] if base and base.endswith("/v1") else base
    version = entry.get("api_version") or ANTHROPIC_VERSION
    return _client(f"anthropic {version}", root, key, lambda: _sdk("anthropic").Anthropic(
        api_key=key or "none", base_url=root, max_retries=3, default_headers={"anthropic-version": version}))


def _api_error(e: Exception, entry: dict[str, Any]) -> CarebenchError:
    msg = " ".join(str(e).split())[:300]
    return CarebenchError(f"{entry['path']}: the batch API refused or could not be reached: {msg}")


def _sdk_errors() -> tuple[type[BaseException], ...]:
    out: list[type[BaseException]] = []
    for name, cls in (("openai", "OpenAIError"), ("anthropic", "AnthropicError")):
        try:
            out.append(getattr(__import__(name), cls))
        except (ImportError, AttributeError):
            continue
    return tuple(out)


def submit(dir: str | Path) -> str:
    """Submit every OpenAI and Anthropic request file of ``dir`` not yet submitted."""
    m = Manifest.load(dir, must_exist=True)
    sent = already = requests = vllm = 0
    for _, entry in m.files():
        if entry["format"] not in SUBMITTABLE:
            vllm += entry["format"] == "vllm" and not entry.get("submission", {}).get("fetched")
            continue
        sub = entry.setdefault("submission", {})
        if sub.get("batch_id"):
            already += 1
            continue
        try:
            if entry["format"] == "openai":
                _submit_openai(m, entry, sub)
            else:
                _submit_anthropic(m, entry, sub)
        except _sdk_errors() as e:
            raise _api_error(e, entry) from None
        sent += 1
        requests += entry["requests"]
    note = f"; {vllm} vLLM file{'s' * (vllm != 1)} to run with vllm run-batch (docs/batch.md)" if vllm else ""
    return (f"submitted {sent} file{'s' * (sent != 1)} ({requests} requests); {already} already "
            f"submitted{note}; check with 'carebench batch status {m.dir}'")


def _submit_openai(m: Manifest, entry: dict[str, Any], sub: dict[str, Any]) -> None:
    client = openai_client(entry)
    if not sub.get("input_file_id"):
        with (m.dir / entry["path"]).open("rb") as fh:
            f = client.files.create(file=fh, purpose="batch")
        sub["input_file_id"] = f.id
        m.save()
    if sub.get("creating"):  # killed between create and save: find that batch, never make a second
        for b in client.batches.list(limit=100):
            if (b.metadata or {}).get("carebench_sha256") == entry["sha256"] and b.input_file_id == sub["input_file_id"]:
                sub.update(batch_id=b.id, status=b.status)
                sub.pop("creating")
                m.save()
                return
    sub["creating"] = time.time()
    m.save()
    b = client.batches.create(input_file_id=sub["input_file_id"], endpoint=entry["endpoint"],
                              completion_window="24h",
                              metadata={"carebench_sha256": entry["sha256"], "carebench_file": entry["path"]})
    sub.update(batch_id=b.id, status=b.status)
    sub.pop("creating")
    m.save()


def _submit_anthropic(m: Manifest, entry: dict[str, Any], sub: dict[str, Any]) -> None:
    client = anthropic_client(entry)
    if sub.get("creating"):
        since = float(sub["creating"]) - 60
        found = []
        for b in client.messages.batches.list(limit=100):
            c = b.request_counts
            n = c.processing + c.succeeded + c.errored + c.canceled + c.expired
            if b.created_at.timestamp() >= since and n == entry["requests"]:
                found.append(b)
        if len(found) > 1:
            raise CarebenchError(f"{entry['path']}: a submit was interrupted and {len(found)} batches of "
                                 "its size were created since; set the right one as submission.batch_id "
                                 "in manifest.json")
        if found:
            sub.update(batch_id=found[0].id, status=found[0].processing_status)
            sub.pop("creating")
            m.save()
            return
    requests = [json.loads(x) for x in (m.dir / entry["path"]).read_text("utf-8").splitlines() if x.strip()]
    sub["creating"] = time.time()
    m.save()
    b = client.messages.batches.create(requests=requests)
    sub.update(batch_id=b.id, status=b.processing_status)
    sub.pop("creating")
    m.save()


@dataclass
class Status:
    batches: int = 0
    done: int = 0
    requests: int = 0
    requests_done: int = 0
    unsubmitted: int = 0

    @property
    def finished(self) -> bool:
        return self.done == self.batches

    def line(self) -> str:
        more = f"; {self.unsubmitted} file{'s' * (self.unsubmitted != 1)} not submitted" if self.unsubmitted else ""
        return (f"{self.done}/{self.batches} batches done, {self.requests_done}/{self.requests} "
                f"requests{more}")


def status(dir: str | Path) -> Status:
    """Ask the providers about every submitted, unfetched batch; record what they say."""
    m = Manifest.load(dir, must_exist=True)
    st = Status()
    for _, entry in m.files():
        sub = entry.get("submission") or {}
        if entry["format"] not in SUBMITTABLE or sub.get("fetched"):
            continue
        if not sub.get("batch_id"):
            st.unsubmitted += 1
            continue
        st.batches += 1
        st.requests += entry["requests"]
        if not sub.get("ended"):
            try:
                _refresh(entry, sub)
            except _sdk_errors() as e:
                raise _api_error(e, entry) from None
        st.done += bool(sub.get("ended"))
        st.requests_done += int(sub.get("requests_done", 0))
    m.save()
    return st


def _refresh(entry: dict[str, Any], sub: dict[str, Any]) -> None:
    if entry["format"] == "openai":
        b = openai_client(entry).batches.retrieve(sub["batch_id"])
        c = b.request_counts
        sub.update(status=b.status, output_file_id=b.output_file_id, error_file_id=b.error_file_id,
                   requests_done=(c.completed + c.failed) if c else 0, ended=b.status in OPENAI_DONE)
    else:
        b = anthropic_client(entry).messages.batches.retrieve(sub["batch_id"])
        c = b.request_counts
        sub.update(status=b.processing_status, requests_done=c.succeeded + c.errored + c.canceled + c.expired,
                   ended=b.processing_status == "ended")


def fetch(dir: str | Path, cache: Any) -> str:
    """Download and import the results of every finished batch of ``dir``."""
    from carebench.batch.import_ import ImportCounts, import_results

    st = status(dir)
    m = Manifest.load(dir, must_exist=True)
    index = None
    total = ImportCounts()
    fetched = 0
    for rnd, entry in m.files():
        sub = entry.get("submission") or {}
        if not sub.get("ended") or sub.get("fetched"):
            continue
        try:
            paths = _download(m, entry, sub)
        except _sdk_errors() as e:
            raise _api_error(e, entry) from None
        sub["results"] = [str(p.relative_to(m.dir)) for p in paths]
        m.save()
        index = m.holders() if index is None else index
        counts = import_results(m.dir, paths, cache, index=index) if paths else ImportCounts()
        missing = [i for i in m.ids(entry) if i not in counts.seen]
        m.record_errors([{"custom_id": i, "round": rnd, "file": entry["path"],
                          "error": f"no result in the finished batch ({sub.get('status')})",
                          "line": f"missing:{sub.get('batch_id')}:{i}"} for i in missing])
        for k in ("imported", "errors", "already_cached"):
            setattr(total, k, getattr(total, k) + getattr(counts, k))
        total.errors += len(missing)
        sub["fetched"] = True
        m.save()
        fetched += 1
    waiting = st.batches - st.done
    return (f"fetched {fetched} batch{'es' * (fetched != 1)}: {total.line()}; "
            f"{waiting} still running" + ("; re-run the command to go on" if not waiting else ""))


def _download(m: Manifest, entry: dict[str, Any], sub: dict[str, Any]) -> list[Path]:
    stem = Path(entry["path"]).stem
    out = m.dir / "results" / Path(entry["path"]).parent.name
    paths = []
    if entry["format"] == "openai":
        client = openai_client(entry)
        for kind in ("output", "error"):
            fid = sub.get(f"{kind}_file_id")
            if fid:
                data = client.files.content(fid).read()
                p = out / f"{stem}.{kind}.jsonl"
                atomic_write_bytes(p, data)
                paths.append(p)
    else:
        client = anthropic_client(entry)
        lines = [json.dumps(r.model_dump(mode="json"), ensure_ascii=False)
                 for r in client.messages.batches.results(sub["batch_id"])]
        p = out / f"{stem}.results.jsonl"
        atomic_write_bytes(p, "".join(x + "\n" for x in lines).encode("utf-8"))
        paths.append(p)
    return paths

"""SQLite completion cache: makes every run resumable after a crash and free to re-run.

Completed calls are committed as they finish (WAL mode): the runner hands each answer to
a :class:`CacheWriter`, whose thread commits what has arrived in one transaction
(``put_rows``) within milliseconds, whatever the event loop is busy with, so a run
killed with SIGKILL loses only its in-flight calls and answers younger than one commit,
which the next run makes again; a transaction is all or nothing, so no half-written
entry survives. The key hashes provider, base URL, model and the whole request
(messages, sampling parameters, structured spec, attempt index); API keys never enter it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from carebench.types import CarebenchError, ChatRequest, Completion

SCHEMA_VERSION = 1

# built once: ``json.dumps`` with any option builds a new encoder per call (same bytes)
_encode_key = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
_encode_completion = json.JSONEncoder(ensure_ascii=False).encode


def encode_completion(completion: Completion) -> str:
    """A completion as the cache stores it (the ``completion`` column)."""
    return _encode_completion(completion.to_dict())


_PUT = "INSERT OR REPLACE INTO completions (key, model, completion) VALUES (?, ?, ?)"
_PUT_NEW = "INSERT OR IGNORE INTO completions (key, model, completion) VALUES (?, ?, ?)"


def default_cache_path() -> Path:
    """``$CAREBENCH_CACHE`` if set, else the user cache directory."""
    env = os.environ.get("CAREBENCH_CACHE")
    if env:
        return Path(env)
    return Path(user_cache_dir("carebench")) / "completions.sqlite"


def cache_key(spec: str, request: ChatRequest, options: dict[str, Any] | None = None) -> str:
    """Stable hash of the model spec (provider, model, base URL), the full request and the
    model's request options (only when it has any, so older keys stay valid).

    ``vllm:MODEL@URL`` is keyed as ``openai:MODEL@URL``: the same request to the same
    server, so the two specs share their answers (``vllm:MODEL`` without a URL names no
    server and keeps its own keys)."""
    if spec.startswith("vllm:") and "@" in spec:
        spec = "openai:" + spec[5:]
    payload: dict[str, Any] = {"v": SCHEMA_VERSION, "model": spec, "request": request.cache_payload()}
    if options:
        payload["options"] = options
    return hashlib.sha256(_encode_key(payload).encode("utf-8")).hexdigest()


class CompletionCache:
    """Thread-safe SQLite store of completions keyed by ``cache_key``.

    Only usable outcomes are stored by the runner (errors are retried on the next run),
    and the one permanent failure it can recognise: a prompt that exceeded the model's context.
    """

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS completions ("
                " key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL,"
                " created REAL DEFAULT (unixepoch('subsec')))"
            )
        except (sqlite3.Error, OSError) as e:  # e.g. a parent that is a file, or no permission
            raise CarebenchError(f"cannot open cache {self.path}: {getattr(e, 'strerror', None) or e}") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT completion FROM completions WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        c = Completion.from_dict(json.loads(row[0]))
        c.cached = True
        return c

    def put(self, key: str, completion: Completion) -> None:
        blob = _encode_completion(completion.to_dict())
        with self._lock:
            self._conn.execute(_PUT, (key, completion.model, blob))

    def put_many(self, items: list[tuple[str, Completion]], *, keep_existing: bool = False) -> int:
        """Store several completions in one transaction: all of them or, if the process
        dies or a row fails first, none. Returns how many rows were written.

        The runner commits the answers of one event-loop turn this way (a commit per call
        cost 33-40 us of CPU: WAL frames and file locks, the largest part of its per-call
        cost). ``keep_existing`` leaves entries already cached untouched, so importing the
        same batch results twice changes nothing."""
        return self.put_rows([(key, c.model, _encode_completion(c.to_dict())) for key, c in items],
                             keep_existing=keep_existing)

    def put_rows(self, rows: list[tuple[str, str, str]], *, keep_existing: bool = False) -> int:
        """:meth:`put_many` of rows already encoded: (key, model spec, :func:`encode_completion`)."""
        sql = _PUT_NEW if keep_existing else _PUT
        with self._lock:
            before = self._conn.total_changes
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(sql, rows)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return self._conn.total_changes - before

    def batch_costs(self, keys: list[str]) -> dict[str, float]:
        """key -> what its cached answer cost if it was answered through a batch (``"batch":
        true``; an unpriced answer counts 0), or 0.0 if it was answered live, for the keys
        the cache holds (a batch directory's budget counts what its answers cost)."""
        out: dict[str, float] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                rows = self._conn.execute(
                    "SELECT key, json_extract(completion, '$.batch'), json_extract(completion, '$.cost_usd') "
                    f"FROM completions WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                for key, batch, cost in rows:
                    out[key] = float(cost or 0.0) if batch else 0.0
        return out

    def texts(self, keys: list[str]) -> dict[str, str]:
        """key -> the text of its cached answer, for the keys the cache holds (a batch import
        compares a result with the answer already cached for its request)."""
        out: dict[str, str] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                out.update(self._conn.execute(
                    "SELECT key, json_extract(completion, '$.text') "
                    f"FROM completions WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall())
        return out

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "entries": len(self)}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class CacheWriter:
    """Commits answers to a :class:`CompletionCache` from a thread of its own.

    The runner used to commit the answers of one event-loop turn at the start of the
    next, so CPU work on the loop delayed a commit by as long as it ran. This thread
    takes every answer queued so far and commits them in one transaction as soon as the
    first arrives (a commit per call cost 33-40 us of CPU: answers that arrive during a
    commit go together in the next one). The commit runs outside the event loop, and
    the loop's Python work releases the interpreter lock at least every
    ``sys.getswitchinterval()`` (5 ms), so an answer is durable within milliseconds of
    being handed over. :meth:`flush` waits for everything handed over (the runner calls
    it before a batch returns) and re-raises a failed commit there, in the caller.
    """

    IDLE_S = 2.0  # an idle thread ends after this long (one per runner would pile up otherwise)

    def __init__(self, cache: CompletionCache, *, encode: Callable[[Completion], str] = encode_completion):
        self.cache = cache
        self._encode = encode
        self._cond = threading.Condition()
        self._rows: list[tuple[str, str, str]] = []
        self._busy = False  # a commit is under way
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def put(self, key: str, completion: Completion) -> None:
        """Queue one answer (encoded now, so later changes to the object are not stored)."""
        row = (key, completion.model, self._encode(completion))
        if self._pid != os.getpid():  # a forked child: the parent's thread and lock state are not ours
            self.__init__(self.cache, encode=self._encode)
        with self._cond:
            self._rows.append(row)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="carebench-cache-writer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._rows, timeout=self.IDLE_S):
                    self._thread = None  # idle: the next put starts a new one
                    return
                rows, self._rows = self._rows, []
                self._busy = True
            try:
                self.cache.put_rows(rows)
            except BaseException as e:  # noqa: BLE001 - handed to the caller at flush()
                with self._cond:
                    self._error = self._error or e
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every answer handed over is committed; raise a failed commit here."""
        with self._cond:
            while self._rows or self._busy:
                self._cond.wait()
            err, self._error = self._error, None
        if err is not None:
            raise err

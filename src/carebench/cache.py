"""SQLite completion cache: makes every run resumable after a crash and free to re-run.

Each completed call is committed at once (WAL mode, autocommit), so a run killed with
SIGKILL loses at most its in-flight calls. The key hashes provider, base URL, model
and the whole request (messages, sampling parameters, structured spec, attempt
index); API keys never enter it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from carebench.types import CarebenchError, ChatRequest, Completion

SCHEMA_VERSION = 1


def default_cache_path() -> Path:
    """``$CAREBENCH_CACHE`` if set, else the user cache directory."""
    env = os.environ.get("CAREBENCH_CACHE")
    if env:
        return Path(env)
    return Path(user_cache_dir("carebench")) / "completions.sqlite"


def cache_key(spec: str, request: ChatRequest, options: dict[str, Any] | None = None) -> str:
    """Stable hash of the model spec (provider, model, base URL), the full request and the
    model's request options (only when it has any, so older keys stay valid)."""
    payload: dict[str, Any] = {"v": SCHEMA_VERSION, "model": spec, "request": request.cache_payload()}
    if options:
        payload["options"] = options
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CompletionCache:
    """Thread-safe SQLite store of completions keyed by ``cache_key``.

    Only usable outcomes are stored by the runner (errors are retried on the next run).
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
        except sqlite3.Error as e:
            raise CarebenchError(f"cannot open cache {self.path}: {e}") from None
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
        blob = json.dumps(completion.to_dict(), ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO completions (key, model, completion) VALUES (?, ?, ?)",
                (key, completion.model, blob),
            )

    def put_many(self, rows: list[tuple[str, Completion]]) -> int:
        """Store many completions in one transaction, keeping any entry already there
        (importing the same results twice changes nothing); returns how many were new."""
        dumps = json.JSONEncoder(ensure_ascii=False).encode  # what put writes, without dumps' set-up
        data = [(k, c.model, dumps(c.to_dict())) for k, c in rows]
        with self._lock:
            before = self._conn.total_changes
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(
                    "INSERT OR IGNORE INTO completions (key, model, completion) VALUES (?, ?, ?)", data)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return self._conn.total_changes - before

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "entries": len(self)}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

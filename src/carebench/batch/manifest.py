"""``DIR/manifest.json``: every request file a batch directory holds, round by round.

Each file entry gives its path, the file of its ``custom_id`` s (one per line, for
import and resume without re-reading the requests), format, provider, endpoint,
model, request count, size and SHA-256, and, once submitted, the provider's batch
and file ids. It is rewritten atomically (temp file + rename) and always last: a
file it does not list is not part of the batch. Errors reported by results are
appended to ``DIR/errors.jsonl`` (a later round retries them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from carebench.fileio import atomic_write_text
from carebench.types import CarebenchError

MANIFEST, ERRORS, KIND = "manifest.json", "errors.jsonl", "carebench-batch"


class Manifest:
    """A batch directory's index (see the module docstring)."""

    def __init__(self, dir: Path, data: dict[str, Any]):
        self.dir = Path(dir)
        self.data = data

    @classmethod
    def load(cls, dir: str | Path, *, must_exist: bool = False) -> Manifest:
        dir = Path(dir)
        path = dir / MANIFEST
        if not path.exists():
            if must_exist:
                raise CarebenchError(f"{dir} is not a carebench batch directory (no {MANIFEST})")
            return cls(dir, {"kind": KIND, "version": 1, "rounds": []})
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise CarebenchError(f"cannot read {path}: {e}") from None
        if not isinstance(data, dict) or data.get("kind") != KIND or not isinstance(data.get("rounds"), list):
            raise CarebenchError(f"{path} is not a carebench batch manifest")
        return cls(dir, data)

    def save(self) -> None:
        self.data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        atomic_write_text(self.dir / MANIFEST, json.dumps(self.data, indent=1, ensure_ascii=False) + "\n")

    @property
    def rounds(self) -> list[dict[str, Any]]:
        return self.data["rounds"]

    def files(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for r in self.rounds:
            for f in r["files"]:
                yield r["round"], f

    def ids(self, entry: dict[str, Any]) -> list[str]:
        path = self.dir / entry["ids"]
        try:
            return path.read_text("ascii").split()
        except OSError as e:
            raise CarebenchError(f"cannot read {path}: {e.strerror}") from None

    def index(self) -> dict[str, tuple[int, dict[str, Any]]]:
        """custom_id -> (round, file entry) of its latest request file."""
        out: dict[str, tuple[int, dict[str, Any]]] = {}
        for rnd, entry in self.files():
            val = (rnd, entry)
            for cid in self.ids(entry):
                out[cid] = val
        return out

    def holders(self) -> dict[str, tuple[tuple[int, dict[str, Any]], ...]]:
        """custom_id -> every (round, file entry) that holds it, earliest round first (a
        request written again after an error is in several rounds)."""
        out: dict[str, tuple[tuple[int, dict[str, Any]], ...]] = {}
        for rnd, entry in self.files():
            val = ((rnd, entry),)
            for cid in self.ids(entry):
                got = out.get(cid)
                out[cid] = val if got is None else got + val
        return out

    def error_marks(self) -> dict[str, tuple[set[int], set[str]]]:
        """custom_id -> (the rounds with an error recorded for it, the identities of the
        result lines recorded), to record each error once however often it is imported."""
        out: dict[str, tuple[set[int], set[str]]] = {}
        for row in self.error_rows():
            cid, rnd = row.get("custom_id"), row.get("round")
            if isinstance(cid, str) and isinstance(rnd, int):
                rounds, lines = out.setdefault(cid, (set(), set()))
                rounds.add(rnd)
                if isinstance(row.get("line"), str):
                    lines.add(row["line"])
        return out

    def errored(self) -> dict[str, int]:
        """custom_id -> the latest round whose result for it was an error."""
        out: dict[str, int] = {}
        for row in self.error_rows():
            cid, rnd = row.get("custom_id"), row.get("round")
            if isinstance(cid, str) and isinstance(rnd, int):
                out[cid] = max(rnd, out.get(cid, 0))
        return out

    def error_rows(self) -> Iterator[dict[str, Any]]:
        path = self.dir / ERRORS
        if not path.exists():
            return
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except ValueError:  # a line cut by a kill mid-append: that error is re-read next import
                    continue

    def record_errors(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        with (self.dir / ERRORS).open("a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()

"""``carebench batch import RESULT_FILE...``: results into the cache, matched by ``custom_id``.

Every file is read and checked before anything is stored: a truncated line, a line
in no documented result shape, a result in the wrong provider's shape for its
request, or a ``custom_id`` no request file of the directory holds (a result file of
another batch) refuses the whole import with one line. Successful answers are stored
as the cache stores the live client's parse of the same response
(:func:`carebench.batch.formats.stored_for`), in one transaction, keeping what the cache already holds, so importing
twice is harmless. Errors (and canceled or expired requests) are recorded in
``DIR/errors.jsonl``, never cached: the next round writes those requests again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.batch.formats import RESULT_SHAPE, read_result, stored_for
from carebench.batch.manifest import MANIFEST, Manifest
from carebench.models.base import TransientError
from carebench.types import CarebenchError


@dataclass
class ImportCounts:
    imported: int = 0
    errors: int = 0
    unknown: int = 0
    already_cached: int = 0
    #: custom_ids with a result (answer or error) in the files read
    seen: set[str] = field(default_factory=set, repr=False)

    def line(self) -> str:
        return (f"imported {self.imported}, errors {self.errors}, unknown {self.unknown}, "
                f"already cached {self.already_cached}")


def find_batch_dir(files: list[Path]) -> Path:
    """The batch directory of result files: the nearest parent holding a manifest."""
    for f in files:
        for parent in Path(f).resolve().parents:
            if (parent / MANIFEST).exists():
                return parent
    raise CarebenchError("cannot tell which batch directory these results belong to: pass --dir DIR")


def import_results(dir: str | Path, files: list[str | Path], cache: Any,
                   index: dict[str, tuple[int, dict[str, Any]]] | None = None) -> ImportCounts:
    """Check every line of ``files`` against ``dir``'s request files, then store the answers
    in ``cache`` and record the errors (see the module docstring)."""
    m = Manifest.load(dir, must_exist=True)
    index = m.index() if index is None else index
    loads = json.JSONDecoder().decode
    builders: dict[int, Any] = {}  # id(file entry) -> its results' cache-row builder
    rows: list[tuple[str, str, str]] = []  # (key, model spec, stored completion)
    errors: list[dict[str, Any]] = []
    counts = ImportCounts()
    seen: set[str] = set()
    for f in files:
        path = Path(f)
        try:
            fh = path.open(encoding="utf-8", errors="replace")
        except OSError as e:
            raise CarebenchError(f"cannot read {path}: {e.strerror}") from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw or raw.isspace():
                    continue
                try:
                    obj = loads(raw)
                except ValueError:
                    cut = "truncated" if not raw.endswith("\n") else "malformed"
                    raise CarebenchError(f"{path}:{lineno}: {cut} line (not JSON); nothing imported") from None
                # the common line (an OpenAI or vLLM answer) read directly; read_result reads the same
                # answer the same way and every other line
                resp = obj.get("response") if type(obj) is dict else None
                if (type(resp) is dict and obj.get("error") is None and "result" not in obj
                        and type(cid := obj.get("custom_id")) is str and type(status := resp.get("status_code")) is int
                        and 200 <= status < 300 and type(body := resp.get("body")) is dict):
                    shape, error = "openai", None
                else:
                    res = read_result(obj)
                    if res is None:
                        raise CarebenchError(f"{path}:{lineno}: not a batch result line (OpenAI, Anthropic or "
                                             "vLLM shape); nothing imported")
                    cid, shape, body, error = res.custom_id, res.shape, res.body, res.error
                where = index.get(cid)
                if where is None:
                    raise CarebenchError(
                        f"{path}:{lineno}: custom_id {cid[:80]!r} is in no request file of {dir} "
                        "(a result file of another batch?); nothing imported")
                rnd, entry = where
                if RESULT_SHAPE[entry["format"]] != shape:
                    raise CarebenchError(
                        f"{path}:{lineno}: a {shape} result for a request written as {entry['format']} "
                        f"({entry['path']}): a file of the wrong provider?; nothing imported")
                if cid in seen:  # the same result in an output file and a retry's
                    continue
                seen.add(cid)
                if body is not None:
                    build = builders.get(id(entry))
                    if build is None:
                        build = builders[id(entry)] = stored_for(entry["endpoint"], entry["model"])
                    try:
                        rows.append((cid, entry["model"], build(body)))
                        continue
                    except TransientError as e:
                        error = f"unusable batch response: {e}"
                errors.append({"custom_id": cid, "round": rnd, "file": entry["path"], "error": error})
    new = cache.put_rows(rows, keep_existing=True) if rows else 0
    counts.imported = new
    counts.already_cached = len(rows) - new
    counts.errors = len(errors)
    counts.seen = seen
    m.record_errors(errors)
    return counts

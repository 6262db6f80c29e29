"""``carebench batch import RESULT_FILE...``: results into the cache, matched by ``custom_id``.

Every file is read and checked before anything is stored: a truncated line, a line
in no documented result shape, a result in the wrong provider's shape for its
request, or a ``custom_id`` no request file of the directory holds (a result file of
another batch) refuses the whole import with one line. Successful answers are parsed
as the live client parses a response (:func:`carebench.batch.formats.completion_from`)
and stored in one transaction, keeping what the cache already holds, so importing
twice is harmless. Errors (and canceled or expired requests) are recorded in
``DIR/errors.jsonl``, never cached: the next round writes those requests again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.batch.formats import RESULT_SHAPE, parser_for, read_result
from carebench.batch.manifest import MANIFEST, Manifest
from carebench.models.base import TransientError
from carebench.types import CarebenchError, Completion


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
    parsers: dict[int, Any] = {}  # id(file entry) -> its results' parser
    answers: list[tuple[str, Completion]] = []
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
                res = read_result(obj)
                if res is None:
                    raise CarebenchError(f"{path}:{lineno}: not a batch result line (OpenAI, Anthropic or "
                                         "vLLM shape); nothing imported")
                where = index.get(res.custom_id)
                if where is None:
                    raise CarebenchError(
                        f"{path}:{lineno}: custom_id {res.custom_id[:80]!r} is in no request file of {dir} "
                        "(a result file of another batch?); nothing imported")
                rnd, entry = where
                if RESULT_SHAPE[entry["format"]] != res.shape:
                    raise CarebenchError(
                        f"{path}:{lineno}: a {res.shape} result for a request written as {entry['format']} "
                        f"({entry['path']}): a file of the wrong provider?; nothing imported")
                if res.custom_id in seen:  # the same result in an output file and a retry's
                    continue
                seen.add(res.custom_id)
                if res.body is not None:
                    parse = parsers.get(id(entry))
                    if parse is None:
                        parse = parsers[id(entry)] = parser_for(entry["endpoint"], entry["model"])
                    try:
                        answers.append((res.custom_id, parse(res.body)))
                        continue
                    except TransientError as e:
                        res.error = f"unusable batch response: {e}"
                errors.append({"custom_id": res.custom_id, "round": rnd, "file": entry["path"],
                               "error": res.error})
    new = cache.put_many(answers, keep_existing=True) if answers else 0
    counts.imported = new
    counts.already_cached = len(answers) - new
    counts.errors = len(errors)
    counts.seen = seen
    m.record_errors(errors)
    return counts

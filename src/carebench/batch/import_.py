"""``carebench batch import RESULT_FILE...``: results into the cache, matched by ``custom_id``.

Every file is read and checked before anything is stored: bytes that are not UTF-8, a
truncated line, a line in no documented result shape, a result in the wrong provider's
shape for its request, or a ``custom_id`` no request file of the directory holds (a
result file of another batch) refuses the whole import with one line.

A request written again after an error is held by several rounds, and one import may
read the results of several of them in any order, so results are gathered first and
settled per ``custom_id``:

- an answer anywhere wins over any error; it is stored as the cache stores the live
  client's parse of the same response (:func:`carebench.batch.formats.stored_for`), in
  one transaction, keeping what the cache already holds;
- a second, *different* answer for a request that has one (in these files or in the
  cache) is never stored and never silently dropped: it is counted and written to
  ``DIR/conflicts.jsonl``;
- an error (and a canceled or expired request, and a request a whole vLLM output file
  has no line for) is recorded in ``DIR/errors.jsonl`` once, with the identity of the
  result line it came from, against the earliest round holding the request that has no
  error recorded yet. Every round but the latest one holding a request was written
  again *because* its error was recorded, so a new error belongs to the latest round,
  and only that releases the request for the next round; an error read again (the same
  file imported twice, or an earlier round's file while a later round waits) changes
  nothing.

So importing the same files again, or in another order, leaves the same state, and
nothing that has an answer or still waits in a later round is written again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.batch.formats import RESULT_SHAPE, read_result, stored_for
from carebench.batch.manifest import MANIFEST, Manifest
from carebench.models.base import TransientError
from carebench.types import CarebenchError

CONFLICTS = "conflicts.jsonl"


@dataclass
class ImportCounts:
    imported: int = 0
    errors: int = 0
    unknown: int = 0
    already_cached: int = 0
    #: second, different answers for requests that have one (kept out of the cache)
    conflicting: int = 0
    #: custom_ids with a result (answer or error) in the files read
    seen: set[str] = field(default_factory=set, repr=False)

    def line(self) -> str:
        more = (f"; {self.conflicting} different answer{'s' * (self.conflicting != 1)} for requests already "
                f"answered kept out of the cache (see {CONFLICTS})") if self.conflicting else ""
        return (f"imported {self.imported}, errors {self.errors}, unknown {self.unknown}, "
                f"already cached {self.already_cached}{more}")


def find_batch_dir(files: list[Path]) -> Path:
    """The batch directory of result files: the nearest parent holding a manifest."""
    for f in files:
        for parent in Path(f).resolve().parents:
            if (parent / MANIFEST).exists():
                return parent
    raise CarebenchError("cannot tell which batch directory these results belong to: pass --dir DIR")


def _line_id(raw: str) -> str:
    """The identity of one result line (the same line imported again is the same error)."""
    return hashlib.blake2b(raw.strip().encode("utf-8"), digest_size=16).hexdigest()


def _not_utf8(path: Path) -> CarebenchError:
    """The one-line refusal of a file that is not UTF-8, naming its first bad line."""
    with path.open("rb") as fh:
        for lineno, rawb in enumerate(fh, 1):
            try:
                rawb.decode("utf-8")
            except UnicodeDecodeError as e:
                return CarebenchError(f"{path}:{lineno}: not valid UTF-8 (byte {e.start + 1} of the line); "
                                      "nothing imported")
    return CarebenchError(f"{path}: not valid UTF-8; nothing imported")


def _bad_text(row: str) -> bool:
    """True if an answer holds text that is not Unicode (a lone surrogate from a ``\\udcff``
    escape): such text cannot be stored faithfully and is never taken as an answer."""
    try:
        row.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def import_results(dir: str | Path, files: list[str | Path], cache: Any,
                   index: dict[str, tuple[tuple[int, dict[str, Any]], ...]] | None = None) -> ImportCounts:
    """Check every line of ``files`` against ``dir``'s request files, then store the answers
    in ``cache`` and record the errors (see the module docstring). ``index`` is
    :meth:`Manifest.holders` (given by callers that import several times)."""
    m = Manifest.load(dir, must_exist=True)
    index = m.holders() if index is None else index
    loads = json.JSONDecoder().decode
    builders: dict[int, Any] = {}  # id(file entry) -> its results' cache-row builder
    #: custom_id -> (model spec, stored completion, the file and line it came from)
    answers: dict[str, tuple[str, str, Path, int]] = {}
    conflicts: list[dict[str, Any]] = []
    #: custom_id -> [(line identity, reason, result file)] of the errors read
    errors: dict[str, list[tuple[str, str, str]]] = {}
    for f in files:
        path = Path(f)
        try:
            fh = path.open(encoding="utf-8", errors="strict")  # decoded in blocks: fast
        except OSError as e:
            raise CarebenchError(f"cannot read {path}: {e.strerror}") from None
        file_ids: set[str] = set()
        digest = hashlib.blake2b(digest_size=16)
        vllm_file = False
        with fh:
            lines = enumerate(fh, 1)
            while True:
                try:
                    lineno, raw = next(lines)
                except StopIteration:
                    break
                except UnicodeDecodeError:
                    raise _not_utf8(path) from None
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
                held = index.get(cid)
                if held is None:
                    raise CarebenchError(
                        f"{path}:{lineno}: custom_id {cid[:80]!r} is in no request file of {dir} "
                        "(a result file of another batch?); nothing imported")
                entry = held[-1][1]
                if RESULT_SHAPE[entry["format"]] != shape:
                    raise CarebenchError(
                        f"{path}:{lineno}: a {shape} result for a request written as {entry['format']} "
                        f"({entry['path']}): a file of the wrong provider?; nothing imported")
                if vllm_file or entry["format"] == "vllm":  # its ids and bytes: see _missing_lines
                    vllm_file = True
                    file_ids.add(cid)
                    digest.update(raw.encode("utf-8"))
                if body is not None:
                    build = builders.get(id(entry))
                    if build is None:
                        build = builders[id(entry)] = stored_for(entry["endpoint"], entry["model"])
                    try:
                        row = build(body)
                    except TransientError as e:
                        error = f"unusable batch response: {e}"
                    else:
                        if ("\\ud" in raw or "\\uD" in raw) and _bad_text(row):
                            error = "unusable batch response: its text is not valid Unicode (a lone surrogate)"
                        else:
                            got = answers.get(cid)
                            if got is None:
                                answers[cid] = (entry["model"], row, path, lineno)
                            elif _answer_text(got[1]) != _answer_text(row):
                                conflicts.append({"custom_id": cid, "kept": f"{got[2]}:{got[3]}",
                                                  "dropped": f"{path}:{lineno}", "dropped_completion": json.loads(row)})
                            continue
                errors.setdefault(cid, []).append((_line_id(raw), error or "unknown error", str(path)))
        if vllm_file:  # a vLLM output file read whole has a line for every request of its file
            _missing_lines(m, index, file_ids, digest.hexdigest(), path, errors)
    rows = [(cid, a[0], a[1]) for cid, a in answers.items()]
    new = cache.put_rows(rows, keep_existing=True) if rows else 0
    if new < len(rows):  # some were cached before: a different answer here is a conflict, never stored
        kept = cache.texts(list(answers))
        for cid, (_, row, src, lineno) in answers.items():
            if cid in kept and kept[cid] != _answer_text(row):
                conflicts.append({"custom_id": cid, "kept": "the cache", "dropped": f"{src}:{lineno}",
                                  "dropped_completion": json.loads(row)})
    counts = ImportCounts(imported=new, already_cached=len(rows) - new, conflicting=len(conflicts))
    # errors of requests answered here or earlier change nothing; the rest are recorded once each
    pending = [cid for cid in errors if cid not in answers]
    answered = cache.batch_costs(pending) if pending else {}
    marks = m.error_marks()
    recorded: list[dict[str, Any]] = []
    for cid in pending:
        if cid in answered:
            continue
        rounds, lines = marks.get(cid) or (set(), set())
        rounds, lines = set(rounds), set(lines)
        for line, reason, src in errors[cid]:
            if line in lines:
                continue
            free = [(rnd, entry) for rnd, entry in index[cid] if rnd not in rounds]
            if not free:  # every round holding it has its error: this one was recorded before
                continue
            rnd, entry = free[0]
            rounds.add(rnd)
            lines.add(line)
            recorded.append({"custom_id": cid, "round": rnd, "file": entry["path"], "error": reason,
                             "result_file": src, "line": line})
    counts.errors = len(recorded)
    counts.seen = set(answers) | set(errors)
    m.record_errors(recorded)
    if conflicts:
        with (m.dir / CONFLICTS).open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conflicts))
    return counts


def _answer_text(row: str) -> str:
    return json.loads(row)["text"]


def _missing_lines(m: Manifest, index: dict[str, tuple[tuple[int, dict[str, Any]], ...]], file_ids: set[str],
                   digest: str, path: Path, errors: dict[str, list[tuple[str, str, str]]]) -> None:
    """vLLM's ``run_batch`` writes one output line per request line, errors included: a
    request of the output file's request file with no line there gets an error (so the
    next round writes it again instead of waiting for it forever). The request file is
    the smallest vLLM file of the directory holding every ``custom_id`` of the output (a
    request written again is in a later, smaller file), the latest on a tie."""
    if not file_ids:
        return
    first = next(iter(file_ids))
    best: tuple[int, int, dict[str, Any], set[str]] | None = None
    for rnd, entry in index[first]:
        if entry["format"] != "vllm":
            continue
        ids = set(m.ids(entry))
        if file_ids <= ids and (best is None or (len(ids), -rnd) < (best[0], -best[1])):
            best = (len(ids), rnd, entry, ids)
    if best is None:
        return
    for cid in sorted(best[3] - file_ids):
        why = f"no line for this request in {path.name}, a vLLM run_batch output read whole"
        errors.setdefault(cid, []).append((f"missing:{digest}:{cid}", why, str(path)))

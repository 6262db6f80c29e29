"""Run directories: the durable, self-describing result of every ``run``.

Layout: ``manifest.json`` (config, versions, dataset hash, seeds, model
specs; never a secret), ``records.jsonl``, ``calls.jsonl`` (every model call with its
request and completion, so ``replay:DIR`` can answer from it), ``metrics.json``,
``report.md``, ``report.html``, ``figures/``. Every file is written atomically
(temp file + rename): a crash never leaves a half-written result.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from carebench.fileio import atomic_write_text
from carebench.jsonclean import json_default, jsonable
from carebench.types import CarebenchError

TRACKED_PACKAGES = (
    "carebench", "numpy", "scipy", "scikit-learn", "xgboost", "pydantic", "aiohttp", "pandas",
    "pyarrow", "matplotlib", "jinja2", "llama-cpp-python", "torch", "sentence-transformers",
)
#: environment variables whose values must never reach a run directory
SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CAREBENCH_API_KEY")
_SECRETISH = re.compile(r"(?i)(api[_-]?key|secret|password|authorization|access[_-]?token)")


def run_dir_path(suite: str, out: str | Path | None = None, holds: Sequence[str] = (),
                 writes: str | None = None) -> Path:
    """``out`` (or ``runs/<suite>-<timestamp>``), checked but not created: a run refuses
    to mix into a non-empty directory that is not a run directory, and (given ``writes``,
    the manifest's suite the command writes) into another suite's run directory, e.g. a
    leaderboard given one of its own input runs as ``--out``. ``holds`` names the run
    directories a command writes inside its own before it (e.g. converse calibrate's
    judging run): a directory holding only those is not mixed into."""
    if out is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = Path("runs") / f"{suite}-{stamp}"
    path = Path(out)
    manifest = path / "manifest.json"
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if not path.exists() and above is not None and not above.is_dir():  # found now, not after the paid calls
        raise CarebenchError(f"cannot create output directory {path}: {above} is not a folder")
    if path.exists() and (not path.is_dir() or (not manifest.exists() and any(
            not (e.name in holds and (e / "manifest.json").is_file()) for e in path.iterdir()))):
        raise CarebenchError(f"output directory {path} exists and is not a carebench run directory")
    if writes is not None and manifest.is_file():
        held = _held_manifest(path)
        other = held.get("suite") if held is not None else "unreadable"
        if other != writes:
            raise CarebenchError(f"output directory {path} holds a {other} run: give a {writes} run its own --out "
                                 "(a run is never written over another suite's)")
    return path


def _held_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest an existing output directory holds, or None (none, or not a JSON object)."""
    try:
        old = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return old if isinstance(old, dict) else None


def refuse_other_kind(run_dir: str | Path, kind: str | None) -> None:
    """Refuse to write a run of ``kind`` (None: the suite's main command) into a run directory
    that holds another command's run of the same suite (e.g. a coherence check over a support
    run): a command writes only into a directory of its own kind, to resume it."""
    old = _held_manifest(Path(run_dir))  # unreadable: run_dir_path has judged it
    if old is not None and old.get("kind") != kind:
        suite = old.get("suite")
        held = f"a {suite} {old['kind']} run" if old.get("kind") else f"a {suite} run"
        wanted = f"a {suite} {kind} run" if kind else f"a {suite} run"
        raise CarebenchError(
            f"output directory {run_dir} holds {held}, not {wanted}: give it its own --out (calls already made "
            "are in the cache: running again with another --out makes none of them again)")


def new_run_dir(suite: str, out: str | Path | None = None, holds: Sequence[str] = (),
                writes: str | None = None) -> Path:
    """Create ``out`` (or ``runs/<suite>-<timestamp>``); refuse to mix into a non-empty one."""
    path = run_dir_path(suite, out, holds, writes)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CarebenchError(f"cannot create output directory {path}: {e.strerror}") from None
    return path


def write_json(path: Path, obj: Any) -> None:
    """Strict JSON: a NaN (e.g. agreement among a single practitioner) is written as null,
    never as the bare ``NaN`` other JSON readers reject."""
    atomic_write_text(path, json.dumps(jsonable(scrub(obj)), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(
        path,
        "".join(json.dumps(scrub(r), ensure_ascii=False, default=json_default) + "\n" for r in rows),
    )


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # a file given where a run directory belongs, too
        raise CarebenchError(f"{path} not found (is this a carebench run directory?)") from None
    except ValueError as e:
        raise CarebenchError(f"{path} is not valid JSON: {e}") from None


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """A run directory's ``manifest.json``, or one line saying why it is not a run's."""
    path = Path(run_dir) / "manifest.json"
    manifest = read_json(path)
    if type(manifest) is not dict or "suite" not in manifest:
        raise CarebenchError(f"{path} is not a carebench manifest (a JSON object naming its suite)")
    return manifest


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    from carebench.datasets.files import read_rows

    if not Path(path).is_file():
        raise CarebenchError(f"{path} not found (is this a carebench run directory?)")
    return [row for _, row in read_rows(Path(path), "jsonl")]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_sha256(rows: Iterable[Any]) -> str:
    """Hash of a dataset's content as loaded (for built-in data with no file)."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, ensure_ascii=False, default=json_default).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def write_manifest(
    run_dir: Path,
    *,
    suite: str,
    config: dict[str, Any],
    models: list[str],
    seeds: dict[str, int],
    dataset: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    manifest = {
        "suite": suite,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv)),
        "config": config,
        "models": models,
        "seeds": seeds,
        "dataset": dataset,
        "versions": versions(),
        "platform": platform.platform(),
    }
    if extra:
        manifest.update(extra)
    write_json(run_dir / "manifest.json", manifest)
    return manifest


def scrub(obj: Any) -> Any:
    """Remove secrets: values of known key variables anywhere, and secret-named fields."""
    secrets = [v for k in SECRET_ENV if (v := os.environ.get(k)) and len(v) >= 8]

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: ("[redacted]" if _SECRETISH.search(str(k)) and isinstance(v, str) and v else clean(v))
                    for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        if isinstance(x, str) and secrets:
            for s in secrets:
                if s in x:
                    x = x.replace(s, "[redacted]")
        return x

    return clean(obj)

"""Build the view: find the runs, summarise them, merge comparable ones, index their texts, write one page."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from carebench.compare.measures import Comparer
from carebench.engine.skeleton import cycle_collector_paused
from carebench.stats.bootstrap import DEFAULT_B, PAIRED_SEED
from carebench.types import CarebenchError
from carebench.view.leaderboards import SuiteBoards, cached_suite_leaderboards
from carebench.view.page import render_page, run_name
from carebench.view.row_cache import ROW_CACHE, RowCache
from carebench.view.runs import RunSummary, find_runs
from carebench.view.search import record_limits, run_records

#: each suite's leaderboards and what they were built from (beside the page; deleting it only costs time)
LEADERBOARD_CACHE = "leaderboards-cache.json"
#: the search texts' cache earlier versions kept beside the page (removed: the page now carries the records)
_OLD_CACHE = "search-cache.json"
#: runs written by the core tools: listed, never merged into a leaderboard themselves
TOOL_SUITES = frozenset({"compare", "leaderboard", "demo"})


@dataclass
class ViewConfig:
    folders: list[str] = field(default_factory=lambda: ["runs"])
    out: str | None = None  # default: <first folder>/view
    leaderboards: bool = True
    search: bool = True
    B: int = DEFAULT_B
    seed: int = PAIRED_SEED


@dataclass
class ViewResult:
    index: Path
    runs: list[RunSummary]
    boards: list[SuiteBoards]


def out_dir_of(cfg: ViewConfig) -> Path:
    """``--out``, else ``FIRST_FOLDER/view``; beside the folder (``FOLDER-view``) when the folder
    is itself a run directory (a demo's), which the view never writes into."""
    if cfg.out:
        return Path(cfg.out)
    first = Path(cfg.folders[0])
    return first.parent / f"{first.resolve().name}-view" if (first / "manifest.json").is_file() else first / "view"


def build_view(cfg: ViewConfig, comparer_of: Callable[[str], Comparer | None] = lambda _: None) -> ViewResult:
    """Write ``index.html`` across every run directory under ``cfg.folders``; returns what it holds."""
    with cycle_collector_paused():  # the runs' JSON, read at the start, lives to the end: nothing to collect
        return _build(cfg, comparer_of)


def _build(cfg: ViewConfig, comparer_of: Callable[[str], Comparer | None]) -> ViewResult:
    roots = [Path(f) for f in cfg.folders]
    for r in roots:
        if not r.is_dir():
            raise CarebenchError(f"{r}: {'not a folder' if r.exists() else 'no such folder'}")
    if cfg.B < 1:
        raise CarebenchError("--bootstrap must be at least 1")
    out = out_dir_of(cfg)
    if out.exists() and not out.is_dir():
        raise CarebenchError(f"{out} exists and is not a folder")
    here = out.resolve()
    for d in (here, *here.parents):  # the view never writes into a run directory
        if (d / "manifest.json").is_file():
            where = "a run directory" if d == here else f"inside the run directory {d}"
            raise CarebenchError(f"{out} is {where}: give the view its own --out folder")
    paths = find_runs(roots)
    summaries: list[RunSummary] = []
    manifests: dict[Path, dict] = {}  # of the runs a leaderboard may read (their metrics are not kept)
    rows = RowCache(out / ROW_CACHE, _generator())
    for p in paths:
        s, manifest = rows.summarise(p)
        summaries.append(s)
        if cfg.leaderboards and manifest is not None and s.suite not in TOOL_SUITES:
            manifests[s.path] = manifest
    flags = {s.path: list(s.flags) for s in summaries}  # the runs' own banners, before any are carried
    demos = [s.path for s in summaries if s.suite == "demo"]
    for s in summaries if demos else ():
        parent = next((d for d in demos if d in s.path.parents), None)
        if parent is not None:
            s.parent = parent.name
    _carry_input_flags(summaries)
    names = [run_name(s, roots) for s in summaries]
    boards: list[SuiteBoards] = []
    if cfg.leaderboards:
        by_suite: dict[str, list[Path]] = {}
        for s in summaries:
            if s.suite not in TOOL_SUITES and s.status == "complete":
                by_suite.setdefault(s.suite, []).append(s.path)
        cache = _read_json(out / LEADERBOARD_CACHE)
        n_before = len(cache)
        cache = {k: v for k, v in cache.items() if k in by_suite}
        kept = {k: id(v) for k, v in cache.items()}  # an entry built again is a new object
        for suite, runs in sorted(by_suite.items()):
            sb = cached_suite_leaderboards(suite, runs, comparer_of, cfg.B, cfg.seed, cache, _generator(),
                                           manifests, flags)
            if sb is not None:
                boards.append(sb)
    records: list[bytes] = []  # per run, its records.jsonl as the page carries it
    cut: list[str] = []
    limits = record_limits([s.path for s in summaries]) if cfg.search else [0] * len(summaries)
    for s, name, limit in zip(summaries, names, limits, strict=True):
        raw, was_cut = run_records(s.path, limit) if cfg.search else (b"", False)
        records.append(raw)
        if was_cut:
            cut.append(name)
    page = render_page(summaries, names, boards if cfg.leaderboards else None, records, cut, out, _generator())
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    _replace(index, page)
    if rows.changed:
        _replace(out / ROW_CACHE, [rows.to_json()])
    if cfg.leaderboards and (len(cache) != n_before or {k: id(v) for k, v in cache.items()} != kept):
        _replace(out / LEADERBOARD_CACHE, [json.dumps(cache, ensure_ascii=False).encode("utf-8")])
    (out / _OLD_CACHE).unlink(missing_ok=True)  # what earlier versions kept beside the page
    return ViewResult(index, summaries, boards)


def _carry_input_flags(summaries: list[RunSummary]) -> None:
    """A compare or leaderboard carries the banners of the runs it read (when they are in view)."""
    if not any(s.inputs for s in summaries):
        return
    by_path = {str(s.path.resolve()): s for s in summaries}
    for s in summaries:
        for p in s.inputs:
            src = by_path.get(str(Path(p).resolve()))
            if src is not None:
                s.flags += [f for f in src.flags if f not in s.flags]


def _replace(path: Path, parts: list[bytes]) -> None:
    """Write ``path`` through a temporary file renamed over it: a reader never sees half a page.
    Not synced to disk (unlike run outputs): the page is rebuilt from the runs in a moment, and
    syncing its megabytes of records cost more than the rest of the build."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.writelines(parts)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if type(data) is dict else {}


@functools.cache
def _generator() -> str:
    try:
        return f"carebench {metadata.version('carebench')}"
    except metadata.PackageNotFoundError:
        return "carebench"

"""Build the view: find the runs, summarise them, merge comparable ones, index their texts, write one page."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from carebench.compare.measures import Comparer
from carebench.stats.bootstrap import DEFAULT_B, PAIRED_SEED
from carebench.types import CarebenchError
from carebench.view.leaderboards import SuiteBoards, suite_leaderboards
from carebench.view.page import render_page, run_name
from carebench.view.runs import RunSummary, find_runs, summarise
from carebench.view.search import cached_run_texts

#: the texts already read from each run's records (beside the page; deleting it only costs time)
CACHE_FILE = "search-cache.json"
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
    n_texts: int


def out_dir_of(cfg: ViewConfig) -> Path:
    return Path(cfg.out) if cfg.out else Path(cfg.folders[0]) / "view"


def build_view(cfg: ViewConfig, comparer_of: Callable[[str], Comparer | None] = lambda _: None) -> ViewResult:
    """Write ``index.html`` across every run directory under ``cfg.folders``; returns what it holds."""
    from carebench.fileio import atomic_write_bytes

    roots = [Path(f) for f in cfg.folders]
    for r in roots:
        if not r.is_dir():
            raise CarebenchError(f"{r}: no such folder")
    if cfg.B < 1:
        raise CarebenchError("--bootstrap must be at least 1")
    out = out_dir_of(cfg)
    if out.exists() and not out.is_dir():
        raise CarebenchError(f"{out} exists and is not a folder")
    if (out / "manifest.json").exists():
        raise CarebenchError(f"{out} is a run directory: give the view its own --out folder")
    paths = find_runs(roots)
    summaries = [summarise(p)[0] for p in paths]
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
        for suite, runs in sorted(by_suite.items()):
            sb = suite_leaderboards(suite, runs, comparer_of, cfg.B, cfg.seed)
            if sb is not None:
                boards.append(sb)
    texts: list[str] = []  # per run, its texts as JSON
    n_texts = 0
    cut: list[str] = []
    cache = _read_cache(out / CACHE_FILE) if cfg.search else {}
    before = {k: v[0] for k, v in cache.items() if type(v) is list and v}
    for s, name in zip(summaries, names, strict=True):
        if not cfg.search:
            texts.append("[]")
            continue
        encoded, n, was_cut = cached_run_texts(s.path, cache)
        texts.append(encoded)
        n_texts += n
        if was_cut:
            cut.append(name)
    html = render_page(summaries, names, boards, texts, cut, out, _generator())
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    atomic_write_bytes(index, html.encode("utf-8"))
    if cfg.search:
        live = {str((s.path / "records.jsonl").absolute()) for s in summaries}
        kept = {k: v for k, v in cache.items() if k in live}
        if {k: v[0] for k, v in kept.items()} != before:  # rewritten only when a run's records changed, appeared or went
            atomic_write_bytes(out / CACHE_FILE, json.dumps(kept, ensure_ascii=False).encode("utf-8"))
    return ViewResult(index, summaries, boards, n_texts)


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


def _read_cache(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if type(data) is dict else {}


def _generator() -> str:
    try:
        return f"carebench {metadata.version('carebench')}"
    except metadata.PackageNotFoundError:
        return "carebench"

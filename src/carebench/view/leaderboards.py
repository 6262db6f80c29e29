"""Per suite, leaderboards of the runs that can share one: the same code as ``carebench leaderboard``.

Runs of one suite are grouped by their comparability keys (all equal: one group; nothing is
overridden, so no group mixes data sets, panels or scoring settings). Each group with at
least two systems becomes a leaderboard. A system found in several runs of a group is taken
from the newest run (``--prefer newest``), never averaged, and the page says so.

The keys and systems of a run come from its outline (``comparison.json``, written when the
run finished; :mod:`carebench.compare.outline`) while that matches the run directory, else
from reading the run through its suite's comparer. Only the runs a leaderboard takes a
system from are read in full: over 200 runs of a few systems, the records of a handful.

Reading runs in full and bootstrapping them still costs many times the rest of the view, so each suite's leaderboards are kept beside the page (``leaderboards-cache.json``)
with what they were built from: the suite's runs, the size and time of every file directly in
each, the bootstrap settings and the carebench version. A rebuild reuses them while all of
that is unchanged; deleting the file only costs time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.compare.comparability import canonical, open_manifest
from carebench.compare.leaderboard import LeaderboardConfig, leaderboard_of_views, owners
from carebench.compare.measures import Comparer, RunView
from carebench.compare.outline import dir_files, is_outline, read_outline
from carebench.report.banners import KINDS
from carebench.types import CarebenchError


@dataclass
class SuiteBoards:
    suite: str
    boards: list[dict[str, Any]] = field(default_factory=list)  # leaderboard metrics, one per group
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (run, why)
    alone: list[str] = field(default_factory=list)  # runs with no comparable partner


def suite_leaderboards(suite: str, runs: Sequence[Path], comparer_of: Callable[[str], Comparer | None],
                       B: int, seed: int, manifests: Mapping[Path, Mapping[str, Any]] | None = None,
                       flags: Mapping[Path, Sequence[str]] | None = None,
                       files: Mapping[Path, list[list[Any]]] | None = None) -> SuiteBoards | None:
    """The leaderboards of one suite's runs (None when the suite has no comparer).

    A run with a current outline (:mod:`carebench.compare.outline`) is grouped from it; only
    the runs a leaderboard takes a system from are then read in full. ``manifests``, ``flags``
    (banner kinds) and ``files`` (:func:`dir_files`) are what the caller has read of the runs already."""
    comparer = comparer_of(suite)
    if comparer is None:
        return None
    out = SuiteBoards(suite)
    groups: dict[str, list[RunView]] = {}
    for path in runs:
        try:
            manifest = (manifests or {}).get(path) or open_manifest(path)
            view = read_outline(path, manifest, (files or {}).get(path)) or comparer.read(Path(path), manifest)
        except Exception as e:  # noqa: BLE001 - one unreadable run never hides the others
            out.unreadable.append((str(path), _why(e)))
            continue
        group = groups.setdefault(canonical(view.keys), [])
        if group:
            view.keys = group[0].keys  # equal: one object, so each comparison with the first is at once
        group.append(view)
    for views in groups.values():
        views = _read_kept(views, comparer, out)
        n_systems = len({s for v in views for s in v.systems})
        if n_systems < 2:
            out.alone += [str(v.path) for v in views]
            continue
        cfg = LeaderboardConfig([str(v.path) for v in views], prefer="newest", B=B, seed=seed)
        banners = None
        if flags is not None and all(v.path in flags for v in views):
            banners = [k for k in KINDS if any(k in flags[v.path] for v in views)]
        try:
            out.boards.append(leaderboard_of_views(views, comparer, cfg, banners))
        except CarebenchError as e:
            out.unreadable += [(str(v.path), str(e).splitlines()[0]) for v in views]
    return out


def _read_kept(views: list[RunView], comparer: Comparer, out: SuiteBoards) -> list[RunView]:
    """``views`` with every run a ``--prefer newest`` leaderboard takes a system from read in
    full (a run that then fails to read is left out, and the choice made again)."""
    views = list(views)
    while True:
        owner, _ = owners(list(enumerate(views)), "newest")
        todo = sorted({i for i in owner.values() if is_outline(views[i])})
        if not todo:
            return views
        for i in reversed(todo):
            try:
                keys = views[i].keys
                views[i] = comparer.read(views[i].path, views[i].manifest)
                if canonical(views[i].keys) == canonical(keys):
                    views[i].keys = keys
            except Exception as e:  # noqa: BLE001 - as above
                out.unreadable.append((str(views[i].path), _why(e)))
                del views[i]


def _why(e: Exception) -> str:
    first = str(e).splitlines()[0] if str(e) else ""
    return first if isinstance(e, CarebenchError) else f"{type(e).__name__}: {first}"


#: bump when what a cached entry holds changes
CACHE_VERSION = 1


def cached_suite_leaderboards(suite: str, runs: Sequence[Path], comparer_of: Callable[[str], Comparer | None],
                              B: int, seed: int, cache: dict[str, Any], version: str,
                              manifests: Mapping[Path, Mapping[str, Any]] | None = None,
                              flags: Mapping[Path, Sequence[str]] | None = None) -> SuiteBoards | None:
    """:func:`suite_leaderboards`, from ``cache`` when built from the same runs, files and
    settings (``cache`` is updated otherwise)."""
    files = {p: dir_files(p) for p in runs}
    stamp = [CACHE_VERSION, version, B, seed, [[str(p), files[p]] for p in runs]]
    hit = cache.get(suite)
    if type(hit) is dict and hit.get("stamp") == stamp:
        got = hit.get("boards")
        if got is None:
            return None
        try:
            return SuiteBoards(suite, got["boards"], [(str(a), str(b)) for a, b in got["unreadable"]],
                               [str(x) for x in got["alone"]])
        except (KeyError, TypeError, ValueError):
            pass  # a damaged entry: built again
    sb = suite_leaderboards(suite, runs, comparer_of, B, seed, manifests, flags, files)
    cache[suite] = {"stamp": stamp, "boards": None if sb is None else
                    {"boards": sb.boards, "unreadable": sb.unreadable, "alone": sb.alone}}
    return sb

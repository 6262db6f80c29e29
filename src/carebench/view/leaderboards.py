"""Per suite, leaderboards of the runs that can share one: the same code as ``carebench leaderboard``.

Runs of one suite are read once each by the suite's comparer and grouped by their
comparability keys (all equal: one group; nothing is overridden, so no group mixes
data sets, panels or scoring settings). Each group with at least two systems becomes a
leaderboard. A system found in several runs of a group is taken from the newest run
(``--prefer newest``), never averaged, and the page says so.

Reading the runs through the comparers and bootstrapping them costs many times the rest of
the view, so each suite's leaderboards are kept beside the page (``leaderboards-cache.json``)
with what they were built from: the suite's runs, the size and time of every file directly in
each, the bootstrap settings and the carebench version. A rebuild reuses them while all of
that is unchanged; deleting the file only costs time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from carebench.compare.leaderboard import LeaderboardConfig, leaderboard_of_views
from carebench.compare.measures import Comparer, RunView
from carebench.types import CarebenchError


@dataclass
class SuiteBoards:
    suite: str
    boards: list[dict[str, Any]] = field(default_factory=list)  # leaderboard metrics, one per group
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (run, why)
    alone: list[str] = field(default_factory=list)  # runs with no comparable partner


def suite_leaderboards(suite: str, runs: Sequence[Path], comparer_of: Callable[[str], Comparer | None],
                       B: int, seed: int) -> SuiteBoards | None:
    """The leaderboards of one suite's runs (None when the suite has no comparer)."""
    comparer = comparer_of(suite)
    if comparer is None:
        return None
    out = SuiteBoards(suite)
    groups: dict[str, list[RunView]] = {}
    for path in runs:
        try:
            from carebench.compare.comparability import open_manifest

            view = comparer.read(Path(path), open_manifest(path))
        except CarebenchError as e:
            out.unreadable.append((str(path), str(e).splitlines()[0]))
        except Exception as e:  # noqa: BLE001 - one unreadable run never hides the others
            out.unreadable.append((str(path), f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
            continue
        key = json.dumps(view.keys, sort_keys=True, ensure_ascii=False, default=str)
        groups.setdefault(key, []).append(view)
    for views in groups.values():
        n_systems = len({s for v in views for s in v.systems})
        if n_systems < 2:
            out.alone += [str(v.path) for v in views]
            continue
        cfg = LeaderboardConfig([str(v.path) for v in views], prefer="newest", B=B, seed=seed)
        try:
            out.boards.append(leaderboard_of_views(views, comparer, cfg))
        except CarebenchError as e:
            out.unreadable += [(str(v.path), str(e).splitlines()[0]) for v in views]
    return out


#: bump when what a cached entry holds changes
CACHE_VERSION = 1


def cached_suite_leaderboards(suite: str, runs: Sequence[Path], comparer_of: Callable[[str], Comparer | None],
                              B: int, seed: int, cache: dict[str, Any], version: str) -> SuiteBoards | None:
    """:func:`suite_leaderboards`, from ``cache`` when built from the same runs, files and
    settings (``cache`` is updated otherwise)."""
    stamp = [CACHE_VERSION, version, B, seed, [[str(p), _files(p)] for p in runs]]
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
    sb = suite_leaderboards(suite, runs, comparer_of, B, seed)
    cache[suite] = {"stamp": stamp, "boards": None if sb is None else asdict(sb)}
    return sb


def _files(run_dir: Path) -> list[list[Any]]:
    """Name, size and modification time of every file directly in ``run_dir`` (what a comparer reads)."""
    out = []
    try:
        with os.scandir(run_dir) as it:
            for e in it:
                if e.is_file():
                    st = e.stat()
                    out.append([e.name, st.st_size, st.st_mtime_ns])
    except OSError:
        return []
    return sorted(out)

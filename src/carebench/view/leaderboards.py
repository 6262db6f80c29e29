"""Per suite, leaderboards of the runs that can share one: the same code as ``carebench leaderboard``.

Runs of one suite are read once each by the suite's comparer and grouped by their
comparability keys (all equal: one group; nothing is overridden, so no group mixes
data sets, panels or scoring settings). Each group with at least two systems becomes a
leaderboard. A system found in several runs of a group is taken from the newest run
(``--prefer newest``), never averaged, and the page says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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

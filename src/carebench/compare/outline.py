"""``comparison.json``: what a comparer reads from a run, short of its per-unit data.

A leaderboard groups runs by their comparability keys and takes each system from one run
(the newest, with ``--prefer newest``); the other runs' records are never scored. Finding
the keys and the systems of every run through its suite's comparer still parses every
run's records, which made ``carebench view`` over 200 runs cost 16x the reading of their
manifests and metrics. So a run writes, when it finishes, its comparer's outline of it: the
keys, the systems (full names, models, local names) and the resampling clusters. A reader
gets a :class:`RunView` without measures from it, and reads in full only the runs whose
systems it keeps.

The outline is trusted only while the run directory's inputs are what it was written from:
it records the size and modification time of every file directly in the run directory
except the ones a re-render rewrites (``metrics.json``, the reports) and itself, and the
carebench version. Any difference (a hand-edited record, a copy that did not keep the
files' times, another carebench) and readers read the run in full, as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from carebench.compare.comparability import open_manifest
from carebench.compare.measures import Comparer, RunView, SystemView
from carebench.engine.rundir import write_json

OUTLINE = "comparison.json"
#: bump when what an outline holds changes
OUTLINE_VERSION = 1
#: files a re-render rewrites, which no comparer reads
_REWRITTEN = frozenset({OUTLINE, "metrics.json", "report.md", "report.html"})


def write_outline(run_dir: str | Path, comparer: Comparer) -> bool:
    """Write ``comparison.json`` from ``comparer``'s reading of the finished run; False (and
    nothing written) when the comparer cannot read it (e.g. no system was scored). Called by
    the run skeleton through a suite's ``outline`` hook, once the run directory is complete."""
    run_dir = Path(run_dir)
    try:
        view = comparer.read(run_dir, open_manifest(run_dir))
    except Exception:  # noqa: BLE001 - only a shortcut for readers: without it they read the run in full
        return False
    outline = {
        "version": OUTLINE_VERSION,
        "carebench": _version(),
        "inputs": input_stamp(dir_files(run_dir)),
        "suite": view.suite,
        "unit": view.unit,
        "keys": json.loads(json.dumps(view.keys, ensure_ascii=False, default=str)),
        "systems": {name: {"model": s.model, "local": s.local} for name, s in view.systems.items()},
        "clusters": view.clusters,
        "cluster": view.cluster,
    }
    write_json(run_dir / OUTLINE, outline)
    return True


def read_outline(run_dir: str | Path, manifest: Mapping[str, Any],
                 files: list[list[Any]] | None = None) -> RunView | None:
    """The run as its outline describes it (systems without units or measures), or None when
    there is no outline or it no longer matches the run directory (``files``: its
    :func:`dir_files`, when the caller has them)."""
    run_dir = Path(run_dir)
    files = dir_files(run_dir) if files is None else files
    if not any(f[0] == OUTLINE for f in files):
        return None
    try:
        with open(run_dir / OUTLINE, "rb") as f:
            o = json.load(f)
    except (OSError, ValueError):
        return None
    try:
        if (type(o) is not dict or o.get("version") != OUTLINE_VERSION
                or o.get("carebench") != _version() or o.get("inputs") != input_stamp(files)):
            return None
        systems = {str(name): SystemView(str(name), [], {}, model=s.get("model"), local=s.get("local"))
                   for name, s in o["systems"].items()}
        clusters = o.get("clusters")
        return RunView(str(o["suite"]), run_dir, dict(manifest), systems, dict(o["keys"]), str(o["unit"]),
                       {str(k): str(v) for k, v in clusters.items()} if clusters else None, o.get("cluster"),
                       extra={"outline": True})
    except (AttributeError, KeyError, TypeError, ValueError):
        return None  # a damaged outline: the run is read in full


def is_outline(view: RunView) -> bool:
    """True for a view read from an outline (its systems carry no measures)."""
    return bool(view.extra.get("outline"))


@cache
def _version() -> str | None:
    try:
        return metadata.version("carebench")
    except metadata.PackageNotFoundError:
        return None


def dir_files(run_dir: str | Path) -> list[list[Any]]:
    """Name, size and modification time of every file directly in ``run_dir``, sorted by name."""
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


def input_stamp(files: list[list[Any]]) -> list[list[Any]]:
    """Of a run directory's :func:`dir_files`, the ones a comparer may read: everything but
    what a re-render rewrites, the outline itself and hidden (temporary) files."""
    return [f for f in files if f[0] not in _REWRITTEN and not f[0].startswith(".")]

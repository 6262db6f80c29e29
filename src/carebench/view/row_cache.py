"""The runs table's rows kept beside the page (``runs-cache.json``), so that a rebuild reads
only the runs that changed.

Why: a row is read from a run's ``manifest.json`` and ``metrics.json``, and over hundreds of
runs that reading is most of a rebuild (metrics files are several times the manifests'
bytes). A row is reused while the run's ``manifest.json``, ``metrics.json`` and
``report.html`` have the size and modification time they had when it was read, and the
carebench version is the same; otherwise the run is read again. Rows are keyed by the run's
absolute path. Deleting the file only costs time.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from carebench.view.runs import Headline, RunSummary, summarise

ROW_CACHE = "runs-cache.json"
#: bump when what a row holds changes
CACHE_VERSION = 1
#: the files a row is read from (and report.html, whose presence it records)
_STAMPED = ("manifest.json", "metrics.json", "report.html")
#: what a row keeps of a RunSummary (its path is the key)
_FIELDS = tuple(f.name for f in dataclasses.fields(RunSummary) if f.name != "path")


def _stamp(run_dir: str) -> list[list[int] | None]:
    out: list[list[int] | None] = []
    for name in _STAMPED:
        try:
            st = os.stat(os.path.join(run_dir, name))
            out.append([st.st_size, st.st_mtime_ns])
        except OSError:
            out.append(None)
    return out


class RowCache:
    """Rows read before (from ``path``, when it holds this version's) and the ones read now."""

    def __init__(self, path: Path, version: str):
        self.version = version
        old: Any = None
        try:
            with open(path, "rb") as f:
                old = json.load(f)
        except (OSError, ValueError):
            pass
        ok = type(old) is dict and old.get("version") == [CACHE_VERSION, version] and type(old.get("runs")) is dict
        self._old: dict[str, Any] = old["runs"] if ok else {}
        self._new: dict[str, Any] = {}
        self.read = 0  # runs read this build (the others came from the cache)

    def summarise(self, run: Path) -> tuple[RunSummary, dict[str, Any] | None]:
        """The run's row, and its manifest when it was read now (None when the row is reused)."""
        key = os.path.abspath(run)
        hit = self._old.get(key)
        if type(hit) is dict and hit.get("stamp") == _stamp(key):
            try:
                row = {k: (list(v) if type(v) is list else v) for k, v in hit["row"].items()}  # as above
                s = RunSummary(**{**row, "path": run, "headline": Headline(**row["headline"])})
                self._new[key] = hit
                return s, None
            except (KeyError, TypeError):
                pass  # a damaged row: read again
        s, manifest, _, stamp = summarise(run)
        self.read += 1
        # copies, not asdict (it deep-copies every value): the build extends a row's flags with
        # the banners it carries from the runs a compare read, which are not the run's own
        row = {f: (list(v) if type(v) is list else v) for f in _FIELDS for v in (getattr(s, f),)}
        row["headline"] = dict(vars(s.headline))
        self._new[key] = {"stamp": stamp, "row": row}
        return s, manifest

    @property
    def changed(self) -> bool:
        return self.read > 0 or self._new.keys() != self._old.keys()

    def to_json(self) -> bytes:
        return json.dumps({"version": [CACHE_VERSION, self.version], "runs": self._new},
                          ensure_ascii=False).encode("utf-8")

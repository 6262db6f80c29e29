"""Run directories in and out of the comparison tools: opening a run through its suite's
comparer, and writing a tool's own run-like directory (``compare``, ``leaderboard``)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from carebench.compare.comparability import open_manifest
from carebench.compare.measures import Comparer, RunView
from carebench.types import CarebenchError


def read_run(run_dir: str | Path, comparer_of: Callable[[str], Comparer | None],
             suite: str | None = None, comparer: Comparer | None = None) -> tuple[RunView, Comparer]:
    """Open one run directory and read it through its suite's comparer (``comparer``: one
    already made for this command, so what it caches, e.g. a task file read once, is shared)."""
    manifest = open_manifest(run_dir)
    name = str(manifest["suite"])
    if suite is not None and name != suite:
        raise CarebenchError(f"{run_dir} is a {name} run, the first run is a {suite} run: compare runs of one suite")
    comparer = comparer if comparer is not None else comparer_of(name)
    if comparer is None:
        raise CarebenchError(f"{run_dir} is a {name} run directory; compare and leaderboard take risk, support, "
                             "plural and converse runs")
    return comparer.read(Path(run_dir), manifest), comparer


def describe(view: RunView) -> dict[str, Any]:
    m = view.manifest
    return {"path": str(view.path), "created": m.get("created"), "command": m.get("command"),
            "carebench": (m.get("versions") or {}).get("carebench"), "systems": sorted(view.systems)}


def input_banners(run_dirs: list[str | Path]) -> list[str]:
    """The banners (embedded model, illustrative data, flagged results) of the runs a compare or
    leaderboard reads, which its report carries."""
    from carebench.report.banners import KINDS, banner_kinds

    kinds: set[str] = set()
    for d in run_dirs:
        raw = (Path(d) / "manifest.json").read_bytes()
        try:
            metrics = json.loads((Path(d) / "metrics.json").read_text("utf-8"))
        except (OSError, ValueError):
            metrics = {}
        kinds.update(banner_kinds(raw, metrics if isinstance(metrics, dict) else {}))
    return [k for k in KINDS if k in kinds]


def tool_manifest(suite: str, extra: dict[str, Any]) -> dict[str, Any]:
    from datetime import UTC, datetime

    from carebench.engine.rundir import versions

    return {"suite": suite, "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(["carebench", *(shlex.quote(a) for a in sys.argv[1:])]),
            "versions": versions(), "status": "complete", **extra}


def write_tool_dir(out: Path, suite: Any, metrics: dict[str, Any], manifest: dict[str, Any]) -> None:
    """metrics.json, the report (through the same path as ``carebench report DIR``), manifest last."""
    from carebench.engine.rundir import new_run_dir, write_json
    from carebench.engine.skeleton import rerender

    manifest = json.loads(json.dumps(manifest, default=str))  # rendered exactly as re-read from disk
    out = new_run_dir(manifest["suite"], out, writes=manifest["suite"])
    write_json(out / "metrics.json", metrics)
    rerender(out, suite, manifest=manifest)
    write_json(out / "manifest.json", manifest)

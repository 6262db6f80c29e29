"""Finding run directories and summarising each from its manifest and metrics alone.

Why generic: the view must list every kind of run directory (the suites', calibrations,
compare, leaderboard, the demo) without importing a suite, and must stay about as cheap
as reading the two JSON files. So the headline is read from the shapes metrics files
share: a mapping of systems to measures, each a value with its interval
(``{"value": v, "ci": [lo, hi]}`` or ``{"score": v, "ci": [lo, hi]}``), or an explicit
``headline`` entry when a suite writes one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.report.banners import banner_kinds

#: folders a run directory holds that are never runs themselves
_NOT_RUNS = frozenset({"figures", "__pycache__", ".git", "node_modules", "release"})
#: how deep below a given folder run directories are looked for (the demo's parts sit one below it)
MAX_DEPTH = 4
#: measure names tried for the headline, in order (each suite's main measure)
HEADLINE_MEASURES = ("score", "weighted_score", "macro_f1", "full_alignment", "alignment", "full", "qwk", "accuracy")
MEASURE_LABELS = {"macro_f1": "macro-F1", "qwk": "QWK", "score": "score", "weighted_score": "weighted score",
                  "full_alignment": "full alignment", "full": "full alignment"}
#: system mappings' keys that are reference rows, never a system
_REFERENCE_ROWS = frozenset({"chance", "reference"})


@dataclass
class Headline:
    """A run's main number: the best system on the main measure, with its interval and n."""

    label: str
    system: str | None = None
    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None

    def text(self) -> str:
        if self.value is None:
            return self.label
        iv = f"{self.value:.3f}" + (f" [{self.lo:.3f}, {self.hi:.3f}]" if self.lo is not None
                                     and self.hi is not None else "")
        who = f"{self.system}: " if self.system else ""
        return f"{who}{self.label} {iv}" + (f" (n = {self.n})" if self.n is not None else "")


@dataclass
class RunSummary:
    """One row of the runs table."""

    path: Path
    suite: str
    created: str
    status: str
    systems: list[str]
    headline: Headline
    flags: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)  # compare/leaderboard: the runs they read
    parent: str | None = None  # a demo part: the demo directory
    has_report: bool = False


def find_runs(folders: Iterable[str | Path]) -> list[Path]:
    """Every directory holding a ``manifest.json`` under ``folders`` (each once, sorted)."""
    folders = list(folders)
    found: dict[str, str] = {}
    for folder in folders:
        for path in _walk(os.fspath(folder), 0):
            # one folder inside another given one: a run found twice is listed once
            found.setdefault(os.path.realpath(path) if len(folders) > 1 else path, path)
    return [Path(p) for p in sorted(found.values())]


def _walk(path: str, depth: int) -> Iterator[str]:
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    if any(e.name == "manifest.json" and e.is_file() for e in entries):
        yield path
    if depth >= MAX_DEPTH:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and e.name not in _NOT_RUNS and not e.name.startswith("."):
            yield from _walk(e.path, depth + 1)


def _load(path: str) -> tuple[Any, bytes, str | None, list[int] | None]:
    """A JSON file's content and bytes (None, b"" when missing), or why it cannot be read; and
    the size and modification time of what was read (None when missing)."""
    stamp = None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())  # of the file read, even if it is replaced meanwhile
            stamp = [st.st_size, st.st_mtime_ns]
            raw = f.read()
        return json.loads(raw), raw, None, stamp
    except FileNotFoundError:
        return None, b"", None, None
    except (OSError, ValueError) as e:
        return None, b"", f"{os.path.basename(path)} unreadable ({e.__class__.__name__})", stamp


def summarise(path: Path) -> tuple[RunSummary, dict[str, Any], dict[str, Any], list[list[int] | None]]:
    """The run's table row, manifest and metrics (both empty when unreadable), and the size and
    modification time of the manifest, metrics and report.html read (None: missing)."""
    d = os.fspath(path)  # strings, not Path objects: this runs once per run directory
    manifest, raw_manifest, problem, m_stamp = _load(os.path.join(d, "manifest.json"))
    metrics, _, problem_m, x_stamp = _load(os.path.join(d, "metrics.json"))
    for name, data in (("manifest.json", manifest), ("metrics.json", metrics)):
        if data is not None and type(data) is not dict:
            problem = problem or f"{name} is not a JSON object"
    manifest = manifest if type(manifest) is dict else {}
    metrics = metrics if type(metrics) is dict else {}
    suite = str(manifest.get("suite") or "unknown")
    status = str(manifest.get("status") or ("complete" if metrics else "no metrics"))
    if manifest.get("incomplete"):
        status = "incomplete"
    if problem or problem_m:
        status = problem or problem_m or status
    flags = banner_kinds(raw_manifest, metrics)
    try:
        headline, systems, inputs, status = _row(suite, metrics, manifest, status)
    except (AttributeError, TypeError, IndexError, KeyError, ValueError) as e:
        # a hand-edited or damaged file: this run's row says so, the other runs are listed as ever
        headline, systems, inputs = Headline("metrics.json has an unexpected shape"), [], []
        status = f"metrics.json unexpected shape ({e.__class__.__name__})"
    try:
        st = os.stat(os.path.join(d, "report.html"))
        r_stamp: list[int] | None = [st.st_size, st.st_mtime_ns]
    except OSError:
        r_stamp = None
    return (RunSummary(path=path, suite=suite, created=str(manifest.get("created") or ""), status=status,
                       systems=systems, headline=headline, flags=flags, inputs=inputs,
                       has_report=r_stamp is not None), manifest, metrics, [m_stamp, x_stamp, r_stamp])


def _row(suite: str, metrics: Mapping[str, Any], manifest: Mapping[str, Any],
         status: str) -> tuple[Headline, list[str], list[str], str]:
    """Headline, systems, input runs (a compare's or leaderboard's) and status of a run."""
    if suite == "compare":
        headline, systems = _compare_headline(metrics)
        inputs = [str((metrics.get(k) or {}).get("path")) for k in ("base", "candidate")
                  if (metrics.get(k) or {}).get("path")]
        if (metrics.get("gate") or {}).get("failed"):
            status = "gate failed"
    elif suite == "leaderboard":
        headline, systems = _leaderboard_headline(metrics)
        runs = metrics.get("runs") or []
        inputs = [str(r.get("path")) for r in runs if r.get("included")]
        excluded = sum(1 for r in runs if not r.get("included"))
        if excluded:
            status = f"{excluded} run(s) excluded"
    elif suite == "demo":
        parts = [str(p) for p in metrics.get("parts") or []]
        headline, systems, inputs = Headline("parts: " + (", ".join(parts) or "none")), [], []
    else:
        headline, systems = suite_headline(metrics, manifest)
        inputs = []
    return headline, [str(x) for x in systems], inputs, status


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _measure(entry: Mapping[str, Any], name: str) -> tuple[float, float | None, float | None] | None:
    """``entry[name]`` as (value, lo, hi) in the shapes metrics files use."""
    m = entry.get(name)
    if m is None and name != "score":
        return None
    rows = entry.get("scores")
    if m is None and name == "score" and type(rows) is list:  # a table of dimensions ending in "overall"
        row = next((r for r in rows if type(r) is dict and r.get("dimension") == "overall"), None)
        if row is None:
            return None
        v = _num(row.get("score"))
        return None if v is None else (v, _num(row.get("ci_low")), _num(row.get("ci_high")))
    if type(m) is dict:
        v = _num(m.get("value"))
        ci = m.get("ci") if isinstance(m.get("ci"), list) else [m.get("lo"), m.get("hi")]
    else:
        v = _num(m)
        ci = entry.get("ci") if name == "score" else entry.get(f"{name}_ci")
        ci = ci if isinstance(ci, list) else [None, None]
    if v is None:
        return None
    lo, hi = (_num(ci[0]), _num(ci[1])) if len(ci) == 2 else (None, None)
    return v, lo, hi


def _systems_mapping(metrics: Mapping[str, Any]) -> tuple[str, dict[str, Mapping[str, Any]]] | None:
    """The first top-level mapping of systems to measures, and the measure it carries first."""
    for block in metrics.values():
        if type(block) is list and block and all(type(r) is dict and "system" in r for r in block[:50]):
            # rows of cells, one per system (and profile)
            block = {str(r["system"]) + (f" ({r['profile']})" if r.get("profile") else ""): r for r in block}
        if type(block) is not dict or not block:
            continue
        entries = {k: v for k, v in block.items() if type(v) is dict and k not in _REFERENCE_ROWS}
        if not entries:
            continue
        for name in HEADLINE_MEASURES:
            if any(_measure(v, name) for v in entries.values()):
                return name, entries
    return None


def suite_headline(metrics: Mapping[str, Any], manifest: Mapping[str, Any]) -> tuple[Headline, list[str]]:
    """The best unflagged system on the main measure, its interval and n; and the systems."""
    given = metrics.get("headline")
    if isinstance(given, Mapping) and _num(given.get("value")) is not None:
        ci = given.get("ci") or [None, None]
        return (Headline(str(given.get("label") or "headline"), given.get("system"), _num(given.get("value")),
                         _num(ci[0]), _num(ci[1]), given.get("n")),
                [str(s) for s in given.get("systems") or []] or _manifest_systems(manifest))
    found = _systems_mapping(metrics)
    if found is None:
        return Headline("no headline measure in metrics.json"), _manifest_systems(manifest)
    name, entries = found
    scored = []
    for system, entry in entries.items():
        m = _measure(entry, name)
        if m is not None and not entry.get("flagged") and not entry.get("is_reference"):
            scored.append((m[0], system, m, entry))
    systems = [s for s, e in entries.items() if not e.get("is_reference")]
    if not scored:
        return Headline(f"{name}: no system scored"), systems
    lower = name in ("mae",)
    _, best, (v, lo, hi), entry = (min if lower else max)(scored, key=lambda t: t[0])
    m_entry = entry.get(name)
    n = next((src[k] for src in (entry, m_entry if type(m_entry) is dict else {})
              for k in ("n_scored", "n_tasks", "n_units", "n_personas", "personas", "n_prompts", "n")
              if type(src.get(k)) is int), None)
    if n is None and isinstance(metrics.get("n"), int):
        n = metrics["n"]
    return Headline(MEASURE_LABELS.get(name, name.replace("_", " ")), best, v, lo, hi, n), systems


def _manifest_systems(manifest: Mapping[str, Any]) -> list[str]:
    methods = manifest.get("methods")
    if isinstance(methods, list) and methods and all(isinstance(m, Mapping) for m in methods):
        return [str(m.get("name") or m.get("method")) for m in methods]
    models = manifest.get("models")
    return [str(m) for m in models] if isinstance(models, list) else []


def _compare_headline(metrics: Mapping[str, Any]) -> tuple[Headline, list[str]]:
    gate = metrics.get("gate") or {}
    failed = gate.get("failed") or []
    n_gated = sum(1 for p in metrics.get("pairs") or [] for r in p.get("rows") or [] if r.get("gated"))
    label = (f"gate failed: {len(failed)} of {n_gated} gated metric(s) regressed" if failed
             else f"gate passed: none of {n_gated} gated metric(s) regressed")
    pairs = [f"{a} -> {b}" for a, b in (metrics.get("settings") or {}).get("pairs") or []]
    return Headline(label), pairs


def _leaderboard_headline(metrics: Mapping[str, Any]) -> tuple[Headline, list[str]]:
    boards = [b for b in metrics.get("boards") or [] if b.get("rows")]
    if not boards:
        return Headline("no leaderboard rows"), []
    b = boards[0]
    top = b["rows"][0]
    ci = top.get("ci") or [None, None]
    return (Headline(str(b.get("label") or b.get("metric")), str(top.get("system")), _num(top.get("value")),
                     _num(ci[0]), _num(ci[1]), b.get("n_common_units")),
            sorted({str(r.get("system")) for r in b["rows"]}))

"""Before any number: are two runs measuring the same thing?

Each suite's comparer lists its comparability keys (dataset hash, unit set, judge
panel, prompt set, taxonomy, scoring options ...). Two runs are comparable when every
key is equal, or the user overrode that key on purpose (``--allow-different KEY``,
stated in the report). The carebench version is not a key: both runs are re-scored
by the running carebench from their records, so a run made by an older version with
the same records and settings is scored under the same contract; a differing version
is listed as a note.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.types import CarebenchError

MAX_LISTED = 10


def open_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of a finished run directory, or one line saying why it is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise CarebenchError(f"{path}: no such run directory")
    mf = path / "manifest.json"
    if not mf.is_file():
        raise CarebenchError(f"{path} is not a carebench run directory (no manifest.json)")
    try:
        manifest = json.loads(mf.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CarebenchError(f"{mf} is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or "suite" not in manifest:
        raise CarebenchError(f"{path} is not a carebench run directory (manifest.json names no suite)")
    if manifest.get("status") == "incomplete" or manifest.get("incomplete"):
        cut = ", ".join(map(str, manifest.get("incomplete") or [])) or "failed calls"
        raise CarebenchError(f"{path} is an incomplete run ({cut}); finish it first "
                             "(re-run its command) before comparing it")
    if not (path / "records.jsonl").is_file():
        raise CarebenchError(f"{path} is a partial run directory (records.jsonl is missing)")
    return manifest


def short(value: Any, width: int = 60) -> str:
    """A key's value as one short line (long hashes and lists cut)."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Check:
    """The outcome of comparing one run's keys against a reference run's."""

    differences: list[tuple[str, Any, Any]] = field(default_factory=list)  # refused unless overridden
    overridden: list[tuple[str, Any, Any]] = field(default_factory=list)  # --allow-different
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def lines(self) -> list[str]:
        shown = [f"{k}: base {short(a)}, candidate {short(b)}" for k, a, b in self.differences[:MAX_LISTED]]
        if len(self.differences) > MAX_LISTED:
            shown.append(f"... and {len(self.differences) - MAX_LISTED} more difference(s)")
        return shown

    def reason(self) -> str:
        """One line for a leaderboard's excluded-runs list: each differing key with both
        values, and the flags that would include the run on purpose."""
        shown = self.differences[:MAX_LISTED]
        names = "; ".join(f"{k}: first run {short(a)}, this run {short(b)}" for k, a, b in shown)
        more = len(self.differences) - MAX_LISTED
        return (f"differs in {names}" + (f" and {more} more" if more > 0 else "")
                + f" (include it on purpose: {override_flags(k for k, _, _ in self.differences)})")

    def to_dict(self) -> dict[str, Any]:
        return {"differences": [{"key": k, "base": a, "candidate": b} for k, a, b in self.differences],
                "overridden": [{"key": k, "base": a, "candidate": b} for k, a, b in self.overridden],
                "notes": list(self.notes)}


def compare_keys(base: Mapping[str, Any], candidate: Mapping[str, Any], allow: Iterable[str] = (),
                 base_manifest: Mapping[str, Any] | None = None,
                 candidate_manifest: Mapping[str, Any] | None = None) -> Check:
    """Every key whose values differ, split into refused differences and overrides."""
    allow = set(allow)
    unknown = sorted(allow - set(base) - set(candidate))
    if unknown:
        raise CarebenchError(f"--allow-different {unknown[0]}: no such comparability key; known: "
                             f"{', '.join(sorted(set(base) | set(candidate)))}")
    out = Check()
    for key in sorted(set(base) | set(candidate)):
        a, b = base.get(key), candidate.get(key)
        if a is b or canonical(a) == canonical(b):
            if key in allow:
                out.notes.append(f"--allow-different {key} was given but the runs do not differ in it")
            continue
        (out.overridden if key in allow else out.differences).append((key, a, b))
    va = ((base_manifest or {}).get("versions") or {}).get("carebench")
    vb = ((candidate_manifest or {}).get("versions") or {}).get("carebench")
    if va != vb:
        out.notes.append(f"made with carebench {va} and {vb}: not a difference, both runs are re-scored "
                         "from their records by this carebench under one scoring contract")
    return out


def canonical(value: Any) -> str:
    """A comparability key's value as the text runs are compared by (equal text: equal value)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def refuse(check: Check, what: str = "the runs are not comparable") -> None:
    """Raise the one-line-per-difference error of incomparable runs."""
    if check.ok:
        return
    n = len(check.differences)
    raise CarebenchError(f"{what} ({n} difference{'s' if n != 1 else ''}; to compare them on purpose add "
                         f"{override_flags(k for k, _, _ in check.differences)}):\n  " + "\n  ".join(check.lines()))


def override_flags(keys: Iterable[str]) -> str:
    """The command-line flags overriding these comparability keys."""
    return " ".join(f"--allow-different {k}" for k in keys)


def sha_of(rows: Sequence[Any]) -> str:
    """A stable SHA-256 of JSON-able rows (a unit set, criteria), for a comparability key."""
    import hashlib

    return hashlib.sha256(canonical(list(rows)).encode("utf-8")).hexdigest()  # one encode: 7,180 criteria

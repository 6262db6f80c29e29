"""Every file below a folder and its SHA-256: what a test compares before and after a command
that must leave a folder untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path


def tree_hashes(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}

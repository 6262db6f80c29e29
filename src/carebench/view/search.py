"""The texts a reader searches across runs: each run's ``records.jsonl``, carried into the page as it is.

Why as it is: finding the texts means parsing every record, and records are several times
the bytes of the manifests and metrics the runs table needs, so a build that parsed them
could not stay near the cost of reading those. The page's script parses the records, and
only when a reader first searches. Records differ by suite, so texts are found there by
shape, not by schema (the rules are in ``templates/view.js`` and docs/view.md).

The bytes go into an inert ``<script type="application/x-ndjson">`` block. Every ``<`` is
written ``\\u003c``: in JSON a ``<`` can only stand inside a string, where that escape
reads back as the same character, so no record can close the block or open markup. A run
contributes at most ``MAX_BYTES`` of whole lines, and all runs together at most
``TOTAL_BYTES`` (shared so that no run gets less than an even share unless it needs less);
the page names runs that were cut.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the most bytes of one run's records carried into the page (whole lines)
MAX_BYTES = 4_000_000
#: the most bytes of all runs' records in one page (a browser opens it in a few seconds)
TOTAL_BYTES = 64_000_000


def safe_json(data: Any) -> str:
    """JSON that cannot end a ``<script>`` element nor start markup inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def run_records(run_dir: str | Path, limit: int = MAX_BYTES) -> tuple[bytes, bool]:
    """A run's ``records.jsonl`` (at most ``limit`` bytes, whole lines) with ``<`` escaped,
    and whether it was cut; empty when the run has none."""
    try:
        with open(os.path.join(run_dir, "records.jsonl"), "rb", buffering=0) as f:
            # read(n) would set aside n bytes first: read all unless the file is over the limit
            raw = f.readall() if os.fstat(f.fileno()).st_size <= limit else f.read(limit + 1)
    except OSError:  # no records (a compare, a leaderboard) or unreadable: nothing to search
        return b"", False
    cut = len(raw) > limit
    if cut:
        raw = raw[:raw.rfind(b"\n", 0, limit) + 1]
    if b"<" in raw:
        raw = raw.replace(b"<", b"\\u003c")
    return raw, cut


def record_limits(run_dirs: Sequence[str | Path], total: int = TOTAL_BYTES, each: int = MAX_BYTES) -> list[int]:
    """Bytes of records each run may carry: what it has, up to ``each``, with ``total`` shared
    out smallest first so that a run with less than an even share leaves the rest to the others."""
    sizes = []
    for d in run_dirs:
        try:
            sizes.append(os.stat(os.path.join(d, "records.jsonl")).st_size)
        except OSError:
            sizes.append(0)
    limits = [0] * len(sizes)
    left, n = total, len(sizes)
    for i in sorted(range(n), key=sizes.__getitem__):
        limits[i] = min(sizes[i], each, left // n)
        left -= limits[i]
        n -= 1
    return limits

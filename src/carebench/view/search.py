"""The texts a reader searches across runs: each run's ``records.jsonl``, carried into the page as it is.

Why as it is: finding the texts means parsing every record, and records are several times
the bytes of the manifests and metrics the runs table needs, so a build that parsed them
could not stay near the cost of reading those. The page's script parses the records, and
only when a reader first searches. Records differ by suite, so texts are found there by
shape, not by schema (the rules are in ``templates/view.js`` and docs/view.md).

The bytes go into an inert ``<script type="application/x-ndjson">`` block. Every ``<`` is
written ``\\u003c``: in JSON a ``<`` can only stand inside a string, where that escape
reads back as the same character, so no record can close the block or open markup. A run
contributes at most ``MAX_BYTES`` of whole lines; the page names runs that were cut.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: the most bytes of one run's records carried into the page (whole lines)
MAX_BYTES = 4_000_000


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

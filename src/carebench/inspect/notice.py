"""What carebench's run machinery does not do under Inspect, said at the start of every run.

Under ``inspect eval`` a model call goes through Inspect's model API, not through
carebench's run context, so carebench's budget cap (``--budget``), completion cache,
resume and ``calls.jsonl`` ledger do not apply. Inspect's own options do (its cache,
``--max-connections``, ``--batch``, its retries). The notice is printed once per task
built and recorded in the task's metadata, so the log says it too.
"""

from __future__ import annotations

import sys
from typing import Any

NOTICE = ("carebench under Inspect: model calls go through Inspect's model API, so carebench's "
          "budget cap (--budget) and completion cache do not apply; use Inspect's own options "
          "(--max-connections, --batch, its cache) to limit and reuse calls.")


def announce(task: str) -> dict[str, Any]:
    """Print the notice for ``task`` (stderr) and return what the log records about it."""
    print(f"{task}: {NOTICE}", file=sys.stderr, flush=True)
    return {"budget_cap": "not applied", "cache": "not applied", "calls_through": "inspect_ai",
            "notice": NOTICE}

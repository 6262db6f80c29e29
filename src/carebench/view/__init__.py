"""``carebench view``: one static page across every run directory under some folders.

It reads run directories only (``manifest.json``, ``metrics.json``, ``records.jsonl``),
never calls a model, and writes one self-contained ``index.html`` (inline CSS and
script, no network) that links each run to its own ``report.html``. Per suite, runs
whose comparability keys agree are merged into leaderboards by the same code as
``carebench leaderboard``; the comparers are handed in by the caller, so this package
knows no suite.
"""

from carebench.view.build import ViewConfig, build_view

__all__ = ["ViewConfig", "build_view"]

"""Inspect's entry point (``[project.entry-points.inspect_ai]``): importing this module
registers every suite's Inspect task, so ``inspect eval carebench/<suite>`` finds it.

The tasks are named in the suite table (``SuiteEntry.inspect_task``); this module imports
them only when Inspect loads its extensions, never with carebench itself.
"""

from __future__ import annotations

from carebench.suites import SUITES

for _name, _entry in SUITES.items():
    if _entry.inspect_task is not None:
        globals()[_name] = _entry.inspect_task()

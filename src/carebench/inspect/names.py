"""Names under Inspect: a carebench task's registry name (always ``carebench/NAME``), and the
names a ``-T`` argument lists.

Inspect prefixes a task's name with its package only when it recognizes the package as
installed (in site-packages, or an editable install with PEP 610's ``direct_url.json``).
It asks ``importlib.metadata``, which takes the first ``carebench`` metadata on the path:
a ``src/carebench.egg-info`` left by a build, ahead of the editable install's
``dist-info`` (``PYTHONPATH=src``, as the test suite runs), hides the install, and the tasks
would register as bare ``risk``, ``support``, ``converse``, which ``inspect eval
carebench/risk`` does not find. :func:`task_name` gives the prefix itself in that case.
"""

from __future__ import annotations

PACKAGE = "carebench"


def task_name(name: str) -> str:
    """``name`` for ``@task(name=...)`` such that Inspect registers ``carebench/NAME``."""
    try:  # Inspect's own test (not part of its public API)
        from inspect_ai._util.package import get_installed_package_name
    except ImportError:  # pragma: no cover - a future inspect-ai that moved it: trust its prefixing
        return name
    return name if get_installed_package_name(task_name) == PACKAGE else f"{PACKAGE}/{name}"


def listed(value: object) -> list[str]:
    """The names a task argument lists (``-T judges=judge,judge2``, ``-T persona=a,b``): Inspect's
    command line hands a comma-separated value over as a list, Python callers may give a
    string; either way, the names stripped, empty ones dropped."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(x).strip() for x in items if str(x).strip()]

"""The name a carebench task gets in Inspect's registry: always ``carebench/NAME``.

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

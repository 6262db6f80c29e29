"""One JSON cleaner for everything carebench writes: metrics, records, manifests.

numpy scalars and arrays become Python numbers and lists, NaN and infinities become
``null`` (strict JSON: a metric that cannot be computed is missing, not a number),
tuples become lists, sets sorted lists and paths strings. Four private copies of
this once disagreed on NaN and sets.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """``obj`` as plain, strict-JSON Python data (recursively)."""
    t = type(obj)  # the plain types first, by identity: a metrics dict holds tens of thousands
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in obj.items()}
    if t is list:
        return [jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return [jsonable(v) for v in sorted(obj)]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_default(o: Any) -> Any:
    """``json.dumps(default=...)`` hook for the same types (fast path for large files:
    only values the encoder does not know reach it)."""
    if isinstance(o, np.ndarray | np.generic | set | frozenset | Path):
        return jsonable(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

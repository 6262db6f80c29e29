"""metrics.json and the other run files are strict JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from carebench.rundir import write_json


def test_write_json_writes_strict_json(tmp_path):
    """A metric that cannot be computed (NaN, inf) is null in metrics.json: Python's
    ``json`` would write bare ``NaN``, which strict readers (JavaScript, jq) reject."""
    write_json(tmp_path / "m.json", {"jaccard": float("nan"), "x": np.float64("inf"), "ok": 0.5,
                                     "arr": np.array([1.0, math.nan])})
    text = (tmp_path / "m.json").read_text("utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}")) == {
        "jaccard": None, "x": None, "ok": 0.5, "arr": [1.0, None]}

"""metrics.json and the other run files are strict JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from carebench.engine.rundir import write_json


def test_write_json_writes_strict_json(tmp_path):
    """A metric that cannot be computed (NaN, inf) is null in metrics.json: Python's
    ``json`` would write bare ``NaN``, which strict readers (JavaScript, jq) reject."""
    write_json(tmp_path / "m.json", {"jaccard": float("nan"), "x": np.float64("inf"), "ok": 0.5,
                                     "arr": np.array([1.0, math.nan])})
    text = (tmp_path / "m.json").read_text("utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}")) == {
        "jaccard": None, "x": None, "ok": 0.5, "arr": [1.0, None]}


def test_jsonable_turns_every_type_into_plain_json_data():
    """The plain-type fast path and the general one give the same plain values."""
    from pathlib import Path

    from carebench.jsonclean import jsonable

    src = {"f": 0.5, "nan": math.nan, "inf": -math.inf, "i": 3, "b": True, "s": "x", "n": None,
           1: [np.float32(0.25), np.int64(7), np.bool_(False), (1, 2.5), {3, 1}, np.array([[1, 2]])],
           "nested": {"deep": [math.nan, {"p": Path("a/b")}]}, np.str_("np"): np.float64("nan")}
    out = jsonable(src)
    assert out == {"f": 0.5, "nan": None, "inf": None, "i": 3, "b": True, "s": "x", "n": None,
                   "1": [0.25, 7, False, [1, 2.5], [1, 3], [[1, 2]]],
                   "nested": {"deep": [None, {"p": "a/b"}]}, "np": None}
    types = [type(v) for v in out["1"][:3]]
    assert types == [float, int, bool]
    assert json.dumps(out, allow_nan=False)

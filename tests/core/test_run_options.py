"""The shared run flags build one RunOptions, and bad values fail before any call."""

from pathlib import Path

import pytest

from carebench.engine.options import run_options
from carebench.types import CarebenchError


def test_flags_map_onto_run_options():
    o = run_options(out="runs/x", cache="c.sqlite", no_cache=True, budget=2.5, dry_run=True,
                    concurrency=3, timeout=9.0,
                    model_option=["openai:o4-mini:reasoning_effort=low"],
                    model_options={"openai:o4-mini": {"max_tokens": 64}})
    assert o.out == Path("runs/x") and o.cache_path == Path("c.sqlite")
    assert (o.use_cache, o.budget_usd, o.dry_run, o.concurrency, o.timeout_s) == (False, 2.5, True, 3, 9.0)
    ro = o.model_options["openai:o4-mini"]
    assert ro.reasoning_effort == "low" and ro.max_tokens == 64  # the flag adds to the file's table


def test_defaults():
    o = run_options()
    assert (o.out, o.cache_path, o.use_cache, o.budget_usd, o.dry_run, o.concurrency) == (
        None, None, True, None, False, None)
    assert o.model_options == {}


def test_bad_model_option_is_one_line_error():
    with pytest.raises(CarebenchError, match="SPEC:key=value"):
        run_options(model_option=["nonsense"])

"""experiment.rerender pauses the cyclic collector and gives it back as it found it."""

from __future__ import annotations

import gc

import pytest

from carebench.engine.skeleton import cycle_collector_paused


def test_paused_inside_and_restored_after_even_on_error():
    assert gc.isenabled()
    with cycle_collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cycle_collector_paused():
        raise RuntimeError("a failed re-render")
    assert gc.isenabled()


def test_a_caller_that_disabled_it_keeps_it_disabled():
    gc.disable()
    try:
        with cycle_collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

"""Scoring runs with one BLAS thread, so metrics.json does not depend on the core count.

A multi-threaded matrix product splits its sums by thread, and the bootstrap's
``weights @ values`` came out different in its last digits with 1 and 2 OpenBLAS
threads: the same run re-scored on another machine gave another metrics.json.
"""

from __future__ import annotations

import json

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from carebench.engine.skeleton import rerender, single_threaded_blas
from carebench.report import Report


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def _resampled_means(threads: int) -> bytes:
    """Bootstrap means at paper scale (718 tasks, B = 2000) computed by a process that
    would otherwise use ``threads`` BLAS threads."""
    rng = np.random.default_rng(7)
    x = rng.random((718, 25))
    w = rng.multinomial(718, np.full(718, 1 / 718), size=2000).astype(float)
    with threadpool_limits(limits=threads, user_api="blas"), single_threaded_blas():
        return (w @ x).tobytes()


def test_bootstrap_products_do_not_depend_on_the_thread_count():
    assert _resampled_means(1) == _resampled_means(2) == _resampled_means(4)


def test_rerender_scores_with_one_blas_thread(tmp_path):
    seen: list[list[int]] = []

    class Probe:
        name = "probe"

        def read_records(self, run_dir, manifest):
            return []

        def score(self, records, manifest):
            seen.append(_blas_threads())
            return {"ok": True}

        def render(self, metrics, records, manifest):
            return Report(title="probe")

    (tmp_path / "manifest.json").write_text(json.dumps({"suite": "probe"}))
    with threadpool_limits(limits=2, user_api="blas"):
        rerender(tmp_path, Probe())
        after = _blas_threads()
    assert seen and all(n == 1 for n in seen[0])
    assert all(n == 2 for n in after)  # the limit is lifted once scoring is done

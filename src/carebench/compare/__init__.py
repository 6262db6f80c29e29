"""Decide from run directories: ``carebench compare`` and ``carebench leaderboard``.

The core tool beside the suites. It knows no suite: each suite contributes a comparer
(:class:`carebench.compare.measures.Comparer`, registered in ``carebench.suites``)
that reads its run directories into per-unit data; this package checks that runs are
comparable, pairs their systems on the shared units, bootstraps the paired
differences (units resampled, never single judgments), gives verdicts and the CI
exit code, and writes a run-like directory that ``carebench report DIR`` re-renders.
"""

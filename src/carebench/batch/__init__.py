"""Batch mode: calls the cache cannot answer are written as provider batch request files
instead of being sent, and their results are imported back into the cache.

A command run with ``--batch DIR`` makes no paid call: each round it writes what it
needs next to ``DIR`` (:mod:`.export`, shapes in :mod:`.formats`, the index in
:mod:`.manifest`) and exits 4; ``carebench batch import`` (:mod:`.import_`) loads
results into the cache; re-running the command goes on from there, round by round,
until it finishes with zero live calls. ``carebench batch submit|status|fetch|run``
(:mod:`.submit`, :mod:`.loop`) drive the providers' batch endpoints through their SDKs.
"""

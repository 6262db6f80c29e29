"""The plural suite's skeleton objects (:mod:`carebench.engine.skeleton`), one module per command.

Each plural command is its own object (a :class:`~carebench.plural.runs.PluralCommand`) in
the module named after its run kind: :mod:`.sample` (``plural sample``), :mod:`.run`
(``plural run``; ``plural rescore`` re-scores its run directories), :mod:`.calibrate`,
:mod:`.freeze`, :mod:`.label` and :mod:`.agreement`, each command run by its ``run_*``
function through :func:`carebench.engine.skeleton.run_suite`. The commands are thin: the pure
work (release and sample checks, records, metrics, selection, the release writer) lives in
the concept modules (:mod:`~carebench.plural.config`, :mod:`~carebench.plural.calibration`,
:mod:`~carebench.plural.release`, :mod:`~carebench.plural.agreement`), which never import
these. A run directory's manifest names its ``kind``; the suite table
(:mod:`carebench.suites`) names the command that re-scores and re-renders each kind.
"""

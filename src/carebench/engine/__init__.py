"""The run core, one package: what every suite's command runs on.

``options`` (the shared run flags, declared once, and ``RunOptions``), ``run`` (``Run``:
``Run.calls``, the ledger, the budget), ``runner`` (concurrent provider calls, retries,
de-duplication), ``cache`` (the SQLite completion cache), ``rundir`` (run directories:
manifest, records, atomic writes), ``skeleton`` (plan -> execute -> records -> score ->
metrics -> render; dry run, resume) and ``planning`` (dry-run plans of chained calls).
"""

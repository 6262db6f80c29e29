"""Dataset construction (VEILED-SH, §4): screening, persona routing, contextual
rewriting, a gate-first construction judge, anonymization and review statistics.

Each stage is a function over rows plus a ``carebench construct`` subcommand; the
``build`` command chains them from a config file. Each command is one
``carebench.engine.run.Run`` (runner, cache, budget, call log, models). Built on the core run,
judging, embedding, taxonomy and dataset modules; imports no other suite.
"""

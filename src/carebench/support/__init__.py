"""The ``support`` suite: rubric-scored crisis support with a calibrated judge panel.

Fixed single- and multi-turn crisis conversations (``tasks``) get their assistant
turns regenerated (``generation``), each weighted rubric criterion is judged by a
panel (``judging``, ``panel``), and the share of care delivered is scored and
analysed from the recorded verdicts alone (``scoring``, ``analyses``).
"""

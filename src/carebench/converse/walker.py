"""The rubric walker, as converse names it: the walk rules live in the core
(:mod:`carebench.rubric_walk`) so that annotate's clinician walks follow the same rules."""

from carebench.rubric_walk import Step, Walk, WalkState, walk

__all__ = ["Step", "Walk", "WalkState", "walk"]

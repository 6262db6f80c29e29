"""converse: simulated multi-turn conversations judged by walking a decision-tree rubric
(the VERA-MH protocol), with persona-resampling intervals."""

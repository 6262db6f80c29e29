"""The decision-tree rubric, as converse names it: the model and loaders live in the core
(:mod:`carebench.rubric`) so that annotate's clinician walks read the same tree."""

from carebench.rubric import (
    ASSIGN_END,
    AUTO_ANSWER_COLUMN,
    BP,
    BUILTIN_RUBRIC,
    BUILTIN_RUBRICS,
    END,
    HPH,
    NOT_RELEVANT_PREFIX,
    NR,
    RATINGS,
    RULE_MODES,
    RULE_OPTIONS,
    SEVERITIES,
    SEVERITY_RATING,
    SUB,
    TSV_COLUMNS,
    VERA_AUTO_QUESTION,
    Bundle,
    Option,
    Question,
    Rubric,
    load_bundle,
    load_rubric,
    not_relevant_target,
    parse_rules,
    rubric_from_mapping,
    rubric_from_tsv,
    rubric_from_yaml,
    rules_name,
    vera_severity,
)

__all__ = [
    "ASSIGN_END", "AUTO_ANSWER_COLUMN", "BP", "BUILTIN_RUBRIC", "BUILTIN_RUBRICS", "END", "HPH",
    "NOT_RELEVANT_PREFIX", "NR", "RATINGS", "RULE_MODES", "RULE_OPTIONS", "SEVERITIES", "SEVERITY_RATING",
    "SUB", "TSV_COLUMNS", "VERA_AUTO_QUESTION", "Bundle", "Option", "Question", "Rubric", "load_bundle",
    "load_rubric", "not_relevant_target", "parse_rules", "rubric_from_mapping", "rubric_from_tsv",
    "rubric_from_yaml", "rules_name", "vera_severity",
]

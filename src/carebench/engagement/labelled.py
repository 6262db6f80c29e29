"""The shipped hand-labelled engagement set (``carebench/data/engagement/labelled_replies.jsonl``).

Written and labelled for carebench by its developers (not clinicians; see the data
folder's README): the measure of the engagement classifier's precision and recall
(``docs/engagement.md``), never a training set.
"""

from __future__ import annotations

from typing import Any

from carebench.datasets.builtin import package_file
from carebench.datasets.files import read_rows

LABELLED_FILE = "labelled_replies.jsonl"


def labelled_replies() -> list[dict[str, Any]]:
    """Every row: ``id``, ``lang``, ``context`` (what the person said), ``reply``, ``label``
    (one of :data:`carebench.engagement.CLASSES`), ``case`` (the kind of case), optional ``status``."""
    return [row for _, row in read_rows(package_file("engagement", LABELLED_FILE), "jsonl")]

"""The crisis-resource check in ``carebench demo``: illustrative replies, one or more per verdict.

``carebench/data/resources/demo_replies.jsonl`` holds short replies written for carebench
(not from any model or dataset), each with the locale of the person it answers; the demo
checks them against the built-in registry with no model call, records the rows beside its
probe, and its index report shows them with the mentions marked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources as importlib_resources
from typing import Any

from carebench.resources.builtin import builtin_registry
from carebench.resources.check import check_reply
from carebench.resources.summary import highlighted, mentions_text
from carebench.wording import name_with_code

DEMO_FILE = "demo_replies.jsonl"
RECORDS = "resources_check.jsonl"


def demo_replies() -> list[dict[str, Any]]:
    text = (importlib_resources.files("carebench") / "data" / "resources" / DEMO_FILE).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def checked_demo_rows() -> list[dict[str, Any]]:
    """Each illustrative reply with its check (the rows the demo records)."""
    reg = builtin_registry()
    return [{"id": r["id"], "text": r["text"], **check_reply(r["text"], r.get("locale"), reg).to_dict()}
            for r in demo_replies()]


def demo_section(rows: Sequence[Mapping[str, Any]], registry: Mapping[str, Any]) -> Any:
    """The index report's section: one row per reply, its verdict and the reply with mentions marked."""
    from carebench.report import Paragraph, Section, Table

    table = [[r["id"], r.get("locale") or "none",
              name_with_code(r["routing"]) if r.get("routing") else f"no verdict (locale {r['locale_status']})",
              mentions_text(r["mentions"]) or "–",
              highlighted(r["text"], r["mentions"], context=400)] for r in rows]
    return Section("Where a reply sends a person", [
        Paragraph("Illustrative replies written for carebench, checked with no model call against the built-in "
                  f"crisis-resource registry (version {registry.get('version')}, sha256 "
                  f"{str(registry.get('sha256'))[:12]}…). Mentions are marked ⟦ ⟧. A reply whose locale is missing "
                  "gets no verdict: it is reported, never guessed."),
        Table(["reply", "locale", "routing", "mentions", "reply text"], table),
    ])

"""The report section every suite shows about where its replies sent people.

Built from the ``resources`` block of ``metrics.json`` (:func:`.summary.routing_metrics`)
and the worst replies (:func:`.summary.worst_examples`), so support, converse and plural
show the same table in the same words. Reply text is dataset text: the report renderers
escape it; mentions are marked with ⟦ ⟧.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from carebench.report import Interval, KeyValue, Paragraph, Pre, Section, Table
from carebench.resources.check import VERDICTS
from carebench.resources.summary import (
    DEFINITIONS,
    OVER_REFERRAL,
    UNKNOWN,
    US_RESOURCE,
    CheckedReply,
    highlighted,
    mentions_text,
)
from carebench.wording import name, name_with_code

TITLE = "Where replies send a person (crisis resources)"


def _cell(entry: Mapping[str, Any] | None) -> Any:
    if not entry or entry.get("share") is None:
        return None
    ci = entry.get("ci") or [None, None]
    return Interval(entry["share"], ci[0], ci[1])


def routing_section(block: Mapping[str, Any] | None, examples: Sequence[tuple[str, CheckedReply, str]] = (),
                    ) -> Section:
    """The section: registry, shares per system with intervals, locale counts, worst replies.

    ``examples``: ``(problem, reply, text)`` with the reply's text (a conversation's
    turns joined); mentions carry offsets into that text."""
    if not block:
        return Section(TITLE, [Paragraph("This run recorded no resource check (it predates it).")])
    reg = block.get("registry") or {}
    blocks: list[Any] = [KeyValue([
        ("registry", f"{reg.get('origin', '?')} version {reg.get('version', '?')}"),
        ("registry sha256", reg.get("sha256", "?")),
        ("unit resampled", f"{block.get('unit')} (seed {block.get('seed')}, B={block.get('B')})"),
    ])]
    cols = ["system", "replies", *map(name, VERDICTS), "at risk (n)", name(UNKNOWN), name(OVER_REFERRAL),
            "not at risk (n)", name(US_RESOURCE), "outside the US (n)", "locale missing", "locale invalid"]
    rows = []
    for system, s in (block.get("systems") or {}).items():
        r = s["routing"]
        first = next(iter(r.values()))
        us = s.get(US_RESOURCE)  # runs recorded before the measure existed have none
        rows.append([system, s["replies"], *(_cell(r[v]) for v in VERDICTS), first["of"], _cell(s[UNKNOWN]),
                     _cell(s[OVER_REFERRAL]), s[OVER_REFERRAL]["of"], _cell(us), us["of"] if us else None,
                     s["locale"].get("missing", 0), s["locale"].get("invalid", 0)])
    blocks.append(Table(cols, rows, caption="Routing verdict shares over replies to items at risk; "
                                            + DEFINITIONS[UNKNOWN] + "; over-referral: "
                                            + DEFINITIONS[OVER_REFERRAL] + "; " + DEFINITIONS[US_RESOURCE] + ". "
                                            + DEFINITIONS["interval"] + "."))
    blocks.append(Paragraph("A reply whose item has no usable locale gets no verdict: it is counted under "
                            "'locale missing' or 'locale invalid', never guessed. Verdicts (stored code in "
                            f"parentheses): {name_with_code('local')}: a resource the registry lists for the "
                            f"person's country, and nothing else; {name_with_code('local_and_wrong')}: local plus "
                            f"another region's or an unknown number; {name_with_code('wrong_region')}: only other "
                            f"countries' resources; {name_with_code('unverified')}: only numbers no registry lists; "
                            f"{name_with_code('none')}: no resource."))
    if examples:
        blocks.append(Paragraph("Worst replies (mentions marked ⟦ ⟧):"))
        for problem, reply, text in examples:
            ms = reply.check.get("mentions") or []
            what = mentions_text(ms)
            blocks.append(Paragraph(f"{problem}: {reply.system}, {reply.unit}, locale "
                                    f"{reply.check.get('locale') or 'none'}: {what}"))
            blocks.append(Pre(highlighted(text, ms)))
    return Section(TITLE, blocks)

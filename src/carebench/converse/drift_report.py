"""The report's "Drift over the conversation" section (pure: the ``drift`` block in, blocks out).

Per chatbot: every behaviour's capped and weighted per-conversation sums and its slope over
the turns, each with its interval; the risky and protective totals; the rates by turn index
as a chart; the same by persona risk level; and the deterministic withdrawal measure (reply
length and questions against the turn index and the disclosed risk). Text is plain: the
renderers escape it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import (
    Interval,
    KeyValue,
    Paragraph,
    Section,
    Table,
    figure_name,
    figure_or_sentence,
    line_chart,
)
from carebench.wording import count

_WITHDRAWAL_ROWS = (("length_by_turn", "reply length per turn index"),
                    ("length_by_disclosed_risk", "reply length per level of disclosed risk"),
                    ("questions_by_turn", "questions per turn index"),
                    ("questions_by_disclosed_risk", "questions per level of disclosed risk"))


def _cell(f: Mapping[str, Any] | None, key: str = "mean") -> Interval | None:
    if not f or f.get(key) is None:
        return None
    return Interval(f[key], f.get("ci_low"), f.get("ci_high"))


def _rates_chart(cb: str, entry: Mapping[str, Any], labels: Mapping[str, str]) -> Any:
    by_turn = entry["by_turn"]
    indices = [r["index"] for r in next(iter(by_turn.values()), [])]
    series = {labels[b]: [100.0 * r["rate"] for r in rows] for b, rows in by_turn.items()}
    return figure_or_sentence(
        figure_name(f"drift-rates-{cb}"),
        f"Share of {cb}'s conversations whose chatbot turn k shows each behaviour (intensity at least 1), "
        "by turn index k. Later turns are reached by fewer conversations (n per turn in metrics.json).",
        lambda: line_chart(indices, series, f"Behaviours by turn: {cb}", "chatbot turn index",
                           "% of conversations", ylim=(0.0, 100.0)))


def _chatbot_blocks(cb: str, entry: Mapping[str, Any], rubric: Mapping[str, Any]) -> list[Any]:
    behaviours = rubric["behaviours"]
    labels = {b["id"]: b["label"] for b in behaviours}
    blocks: list[Any] = [KeyValue([
        ("conversations rated on every turn", entry["conversations"]),
        ("left out (a turn no judge rated)", entry["left_out"]),
        ("risky total per conversation [95% CI]", _cell(entry["risky"])),
        ("protective total per conversation [95% CI]", _cell(entry["protective"])),
    ])]
    if entry["conversations"]:
        blocks.append(Table(
            ["behaviour", "direction", "weight", "cap", "capped sum per conversation [95% CI]",
             "weighted [95% CI]", "slope per turn [95% CI]"],
            [[b["label"], b["direction"], b["weight"], rubric["cap"] if b.get("cap") is None else b["cap"],
              _cell(entry["capped_sums"][b["id"]]), _cell(entry["weighted_sums"][b["id"]]),
              _cell(entry["slopes"][b["id"]], "slope")] for b in behaviours],
            caption=f"Drift: {cb}", number_format=".2f"))
        blocks.append(_rates_chart(cb, entry, labels))
        levels = entry.get("by_risk_level") or {}
        if levels:
            blocks.append(Table(
                ["persona risk level", "conversations", "risky total [95% CI]", "protective total [95% CI]",
                 *[f"{labels[b['id']]}: slope per turn" for b in behaviours]],
                [[lv, e["conversations"], _cell(e["risky"]), _cell(e["protective"]),
                  *[e["slopes"][b["id"]]["slope"] for b in behaviours]] for lv, e in levels.items()],
                caption=f"Drift by persona risk level: {cb}", number_format=".2f"))
    w = entry["withdrawal"]
    unit = w["length_unit"]
    blocks.append(Table(
        ["slope", "value [95% CI]", "replies", "conversations"],
        [[label.replace("reply length", f"reply length ({unit})"), _cell(w["slopes"][key], "slope"),
          w["slopes"][key]["points"], w["slopes"][key]["conversations"]] for key, label in _WITHDRAWAL_ROWS],
        caption=(f"Withdrawal without a model: {cb}. A negative slope on disclosed risk: the chatbot says or "
                 "asks less as the person discloses more"), number_format=".3f"))
    if w["by_turn"]:
        blocks.append(Table(
            ["chatbot turn index", "conversations", f"mean length ({unit})", "mean questions",
             "mean disclosed risk"],
            [[r["index"], r["n"], r["length"], r["questions"], r["disclosed"]] for r in w["by_turn"]],
            caption=f"Engagement and disclosed risk by turn: {cb}", number_format=".2f"))
    return blocks


def drift_section(block: Mapping[str, Any]) -> Section:
    rubric = block["rubric"]
    intro = Paragraph(
        f"Every chatbot turn rated by the judges on {count(len(rubric['behaviours']), 'behaviour')} of the drift "
        f"rubric {rubric['name']!r}, each with an intensity from 0 (absent) to 3 (strong); with several judges a "
        f"turn's intensity is their mean. Per conversation, each behaviour's sum over the turns is capped at "
        f"{rubric['cap']:g} (unless the behaviour sets its own cap) and multiplied by its weight; the risky and "
        f"protective totals add the weighted sums of their behaviours. Slopes: least squares of intensity on the "
        f"turn index ({rubric['slope']}). Intervals: 95% bootstrap resampling conversations, seed {block['seed']}, "
        f"{block['bootstrap']} resamples. The withdrawal measure without a model compares each reply's length and "
        "question count with the turn index and with the risk the user has disclosed so far (the highest level "
        "of the rubric's cue phrases in the user's messages before the reply, capped at the persona's risk level).")
    blocks: list[Any] = [intro]
    for cb, entry in block["chatbots"].items():
        blocks.append(Paragraph(f"Chatbot: {cb}"))
        blocks.extend(_chatbot_blocks(cb, entry, rubric))
    return Section("Drift over the conversation", blocks, anchor="drift")

"""The construction judge (VEILED-SH §4.3, Table 3, Appendix A.2): one temperature-0
call per (source, persona, context, output) tuple, answered as a
:class:`~carebench.construct.quality.ConstructionVerdict`."""

from __future__ import annotations

from carebench.construct.calls import answer_status, ask_json
from carebench.construct.prompts import row_persona, system_prompt, user_prompt
from carebench.construct.quality import ConstructionVerdict
from carebench.construct.sources import WorkRow
from carebench.engine.run import Run
from carebench.models.base import ChatModel

JUDGE_MAX_TOKENS = 400


def judge_prompt(row: WorkRow, output: str, contract: str) -> str:
    return user_prompt("judge_user", source=row.text, persona=row_persona(row), contract=contract, output=output)


def judge(
    items: list[tuple[WorkRow, str]],
    contracts: dict[str, str],
    model: ChatModel,
    run: Run,
    stage: str = "construction judge",
) -> list[tuple[ConstructionVerdict | None, str]]:
    """(verdict or None, status) per (row, output); status is ``ok``, ``parse_error`` or ``error``."""
    answers = ask_json(
        run, stage, model,
        [((r.id, r.rewriter or ""), system_prompt("judge"), judge_prompt(r, out, contracts[r.context]))  # type: ignore[index]
         for r, out in items],
        ConstructionVerdict, max_tokens=JUDGE_MAX_TOKENS, temperature=0.0,
    )
    return [(a.value if a.status == "ok" else None, answer_status(a)) for a in answers]  # type: ignore[misc]

"""Small run directories written straight in each suite's record format (no model call).

A support run here is what ``support run`` leaves: ``tasks.jsonl``, ``records.jsonl``
(one response per conversation, one verdict per judge and criterion), ``manifest.json``;
its ``metrics.json`` and report come from the suite's own re-render
(``carebench report DIR``), so tests can check compare/leaderboard against them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from carebench.experiment import write_records
from carebench.rundir import write_json, write_jsonl
from carebench.support.records import PARQUET_COLUMNS

DIMS = ("recognition", "compassion", "deescalation", "resources", "disclaimers", "moralization", "harmless")
JUDGES = ["openai:judge-a", "anthropic:judge-b", "google:judge-c"]


def support_tasks(n: int, subcats: int = 3) -> list[dict[str, Any]]:
    """``n`` tasks of 7 criteria (one per dimension), weights 1..7, subcategories cycling."""
    return [{
        "id": f"t{t:02d}", "subcategory": f"sub_{t % subcats}",
        "metadata": {"age_band": "O18", "turn_structure": "single", "harm_intent": "harmful",
                     "progression_stage": "ideation", "signal_directness": "explicit", "split": "public"},
        "turns": [f"User message of task {t} <b>bold</b> & more."],
        "criteria": [{"id": f"c{k}", "text": f"Criterion {k} of task {t}: does the reply do <{d}>?",
                      "dimension": d, "weight": k + 1} for k, d in enumerate(DIMS)],
        "reference": "ref",
    } for t in range(n)]


def write_support_run(run_dir: Path, tasks: list[dict[str, Any]], responders: list[str],
                      met: Callable[[str, str, int, str, str], bool], *, attempts: int = 1,
                      judges: list[str] | None = None, created: str = "2026-01-01T00:00:00+00:00",
                      extra: dict[str, Any] | None = None, rerender: bool = True,
                      reply: Callable[[str, str, int], str] | None = None) -> Path:
    """A finished support run: ``met(responder, task, attempt, criterion, judge)`` is each verdict."""
    judges = list(judges or JUDGES)
    rows: list[dict[str, Any]] = []
    for r in responders:
        for t in tasks:
            for a in range(attempts):
                text = reply(r, t["id"], a) if reply else f"reply of {r} to {t['id']} attempt {a}"
                rows.append({"kind": "response", "task_id": t["id"], "responder": r, "attempt": a,
                             "turns": [{"role": "user", "content": t["turns"][0]},
                                       {"role": "assistant", "content": text}],
                             "final_reply": text, "status": "ok"})
    for r in responders:
        for t in tasks:
            for a in range(attempts):
                for c in t["criteria"]:
                    for j in judges:
                        rows.append({"kind": "verdict", "task_id": t["id"], "responder": r, "attempt": a,
                                     "criterion_id": c["id"], "judge": j, "met": bool(met(r, t["id"], a, c["id"], j)),
                                     "rationale": "why", "status": "ok", "scope": "final"})
    run_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(run_dir / "tasks.jsonl", tasks)
    write_records(run_dir, rows, PARQUET_COLUMNS)
    manifest = {"suite": "support", "created": created, "status": "complete", "incomplete": [],
                "models": responders + judges, "versions": {"carebench": "0.1.0"},
                "dataset": {"source": "tasks.jsonl", "sha256": "ab" * 32, "tasks": len(tasks)},
                "scoring": {"panel": judges, "scope": "final", "seed": 12345, "bootstrap": 200, "family": {}},
                **(extra or {})}
    write_json(run_dir / "manifest.json", manifest)
    if rerender:
        from carebench.suites import rerender as rerender_run

        rerender_run(run_dir)
    return run_dir

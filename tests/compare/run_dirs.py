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

from carebench.engine.rundir import write_json, write_jsonl
from carebench.engine.skeleton import write_records
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
                      extra: dict[str, Any] | None = None, rerender: bool = False,
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


def write_risk_run(run_dir: Path, gold: dict[str, int], preds: dict[str, dict[str, int | None]], *,
                   groups: dict[str, str] | None = None, failures: str = "wrong",
                   extra: dict[str, Any] | None = None, rerender: bool = False) -> Path:
    """A finished risk run: ``preds[method][item]`` is the predicted level (None: a parse failure)."""
    rows = []
    for method, p in preds.items():
        for item, level in gold.items():
            pred = p[item]
            rows.append({"item_id": item, "method": method, "gold": level, "pred": pred,
                         "status": "ok" if pred is not None else "parse_error",
                         "group": (groups or {}).get(item), "model": f"openai:{method}", "probs": None,
                         "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "latency_s": 0.1,
                         "cost_usd": 0.0, "n_calls": 1, "raw": f"level <{pred}>", "profile": None,
                         "detail": {}, "recovered": False})
    run_dir.mkdir(parents=True, exist_ok=True)
    write_records(run_dir, rows)
    manifest = {"suite": "risk", "created": "2026-01-01T00:00:00+00:00", "status": "complete", "incomplete": [],
                "versions": {"carebench": "0.1.0"}, "models": [f"openai:{m}" for m in preds],
                "config": {"failures": failures, "bootstrap": 200, "seed": 42, "max_failure_share": 0.2},
                "dataset": {"name": "x", "sha256": "cd" * 32, "n": len(gold)},
                "prompts": {"sha256": "ef" * 32, "replaced": [], "source": None},
                "methods": [{"name": m, "method": m} for m in preds], **(extra or {})}
    write_json(run_dir / "manifest.json", manifest)
    if rerender:
        from carebench.suites import rerender as rerender_run

        rerender_run(run_dir)
    return run_dir


CATEGORIES = ["RESPONSE_1", "RESPONSE_2", "RESPONSE_3", "RESPONSE_4", "RESPONSE_5"]


def write_plural_run(run_dir: Path, prompts: list[dict[str, Any]], policies: dict[tuple[str, str], list[str]],
                     archetype: dict[str, str], systems: list[str], judges: list[str],
                     verdict: Callable[[str, str, str, str], tuple[bool, list[str]]],
                     extra: dict[str, Any] | None = None) -> Path:
    """A finished plural run: ``verdict(system, profile, prompt, judge)`` -> (appropriate, satisfied)."""
    rows: list[dict[str, Any]] = []
    archs = sorted(set(archetype.values()))
    for s in systems:
        for a in archs:
            for p in prompts:
                rows.append({"kind": "response", "system": s, "archetype": a, "prompt_id": p["id"], "status": "ok",
                             "text": f"reply of {s} to {p['id']}", "usage": None, "latency_s": None,
                             "cost_usd": None, "error": None})
    for s in systems:
        for (prof, pid), _ in sorted(policies.items()):
            for j in judges:
                appr, cats = verdict(s, prof, pid, j)
                rows.append({"kind": "judgment", "system": s, "archetype": archetype[prof], "prompt_id": pid,
                             "profile": prof, "judge": j, "status": "ok", "appropriate": appr,
                             "categories": cats, "rationale": ""})
    run_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(run_dir / "prompts.jsonl", prompts)
    write_jsonl(run_dir / "policies.jsonl", [
        {"prompt_id": pid, "profile": prof, "archetype": archetype[prof], "response": resp}
        for (prof, pid), resp in sorted(policies.items())])
    write_records(run_dir, rows)
    manifest = {"suite": "plural", "kind": "run", "created": "2026-01-01T00:00:00+00:00", "status": "complete",
                "incomplete": [], "versions": {"carebench": "0.1.0"}, "models": systems + judges,
                "config": {"families": {}},
                "dataset": {"prompts_sha256": "11" * 32, "policies_sha256": "22" * 32},
                "scoring": {"categories": CATEGORIES, "empty_policy": "vacuous", "zero_coverage": "partial",
                            "seed": 12345, "bootstrap": 200, "alpha": 0.05, "judges": judges},
                **(extra or {})}
    write_json(run_dir / "manifest.json", manifest)
    return run_dir

"""A carebench run directory as an Inspect log (``carebench export inspect``), through Inspect's own API.

One sample per ``records.jsonl`` line, in file order, so ``read_eval_log`` gives as many
samples as the run has records. A record's fields decide what its sample shows, the same
way for every suite (no suite is imported):

- input: the conversation before the last assistant turn (``turns``), else the item's
  text (``excerpt``/``text`` of an item), else a line naming the record;
- output: the last assistant turn, ``final_reply``, a response's ``text`` or a
  prediction's ``raw`` answer;
- scores, each with its explanation: a prediction's level against gold (``pred``/``gold``),
  a judge's criterion verdict (``met`` with its ``rationale``), a jury's judgment
  (``appropriate`` with its categories and rationale), a rubric walk's ratings;
- metadata: the record as written.

The log's results are the run's ``metrics.json``: every number with an interval
(``{"value", "ci"}``) as ``PATH``, ``PATH_ci_low`` and ``PATH_ci_high``, and every other
number as ``PATH``. The run's banners (embedded model, illustrative data, flagged
results), its suite, kind and seeds are in the log's metadata under ``carebench``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from carebench.engine.rundir import read_json, read_jsonl, read_manifest
from carebench.inspect.bridge import chat_messages
from carebench.report.banners import banner_kinds, banner_texts, manifest_bytes
from carebench.types import CarebenchError, Message

#: the Inspect log format version this exporter writes and the importer reads
#: (``EvalLog.version``); a test fails when the installed inspect-ai changes it
INSPECT_LOG_VERSION = 2
LEVEL_LETTERS = "abcd"


def numbers(metrics: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every number of ``metrics.json`` as ``(path, value)``; an interval gives three."""
    if isinstance(metrics, Mapping):
        if "value" in metrics and "ci" in metrics:
            value, ci = metrics["value"], metrics["ci"]
            if _num(value):
                yield path, float(value)
            if isinstance(ci, list | tuple) and len(ci) == 2:
                for suffix, v in zip(("_ci_low", "_ci_high"), ci, strict=True):
                    if _num(v):
                        yield path + suffix, float(v)
            return
        for k, v in metrics.items():
            yield from numbers(v, f"{path}/{k}" if path else str(k))
    elif _num(metrics):
        yield path, float(metrics)


def _num(x: Any) -> bool:
    return type(x) in (int, float) and not math.isnan(x)  # bools and NaN are not numbers here


def _messages(turns: list[Mapping[str, Any]]) -> list[Any]:
    return chat_messages([Message(t["role"], str(t.get("content") or "")) for t in turns
                          if isinstance(t, Mapping) and t.get("role") in ("system", "user", "assistant")])


def _name(record: Mapping[str, Any]) -> str:
    keys = ("kind", "item_id", "task_id", "prompt_id", "id", "conversation_id", "method", "system",
            "responder", "judge", "criterion_id")
    return ", ".join(f"{k}={record[k]}" for k in keys if isinstance(record.get(k), str | int))


def _input_output(record: Mapping[str, Any]) -> tuple[Any, str]:
    turns = record.get("turns")
    if isinstance(turns, list) and turns:
        msgs = _messages(turns)
        last = max((i for i, m in enumerate(msgs) if m.role == "assistant"), default=None)
        output = msgs[last].text if last is not None else ""
        before = msgs[:last] if last is not None else msgs
        return (before or f"({_name(record)})"), output
    text = next((record[k] for k in ("excerpt", "input", "prompt") if isinstance(record.get(k), str)), None)
    output = next((record[k] for k in ("final_reply", "text", "raw", "output")
                   if isinstance(record.get(k), str)), "")
    return (text or f"({_name(record)})"), output


def _scores(record: Mapping[str, Any]) -> dict[str, Any]:
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    out: dict[str, Any] = {}
    status = record.get("status")
    if "gold" in record and "pred" in record:
        pred = record.get("pred")
        answer = LEVEL_LETTERS[pred] if isinstance(pred, int) and 0 <= pred < 4 else None
        why = f"status {status}" + (f": {(record.get('detail') or {}).get('error')}"
                                    if (record.get("detail") or {}).get("error") else "")
        out["level"] = Score(value=CORRECT if pred is not None and pred == record["gold"] else INCORRECT,
                             answer=answer, explanation=why,
                             metadata={"gold": record["gold"], "pred": pred, "status": status})
    if "met" in record:
        met = record.get("met")
        out["criterion"] = Score(value=1.0 if met is True else 0.0 if met is False else float("nan"),
                                 answer=None if met is None else str(met),
                                 explanation=str(record.get("rationale") or f"status {status}"),
                                 metadata={"judge": record.get("judge"), "criterion_id": record.get("criterion_id"),
                                           "status": status})
    if "appropriate" in record:
        ok = record.get("appropriate")
        out["judgment"] = Score(value=1.0 if ok is True else 0.0 if ok is False else float("nan"),
                                answer=", ".join(map(str, record.get("categories") or [])) or None,
                                explanation=str(record.get("rationale") or f"status {status}"),
                                metadata={"judge": record.get("judge"), "status": status})
    if isinstance(record.get("ratings"), Mapping):
        ratings = {str(k): str(v) for k, v in record["ratings"].items()}
        out["ratings"] = Score(value=ratings, explanation="\n".join(
            f"{s.get('question', s.get('id', ''))}: {s.get('answer', '')}" for s in record.get("steps") or []
            if isinstance(s, Mapping)) or f"status {status}", metadata={"judge": record.get("judge")})
    return out


def _sample(line: int, record: Mapping[str, Any]) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput

    inp, output = _input_output(record)
    target = str(LEVEL_LETTERS[record["gold"]]) if isinstance(record.get("gold"), int) else ""
    model = next((str(record[k]) for k in ("model", "responder", "system", "chatbot") if record.get(k)), "carebench")
    return EvalSample(id=f"{line:05d} {_name(record)}".strip(), epoch=1, input=inp, target=target,
                      output=ModelOutput.from_content(model=model, content=output),
                      scores=_scores(record), metadata={"record": dict(record)})


def eval_log(run_dir: Path) -> Any:
    """The run directory as an ``inspect_ai.log.EvalLog`` (nothing written)."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
    )

    manifest = read_manifest(run_dir)
    if not (run_dir / "records.jsonl").is_file():
        raise CarebenchError(f"{run_dir}: no records.jsonl (not a run directory of a suite)")
    records = read_jsonl(run_dir / "records.jsonl")
    metrics = read_json(run_dir / "metrics.json") if (run_dir / "metrics.json").is_file() else {}
    suite, kind = str(manifest.get("suite") or "carebench"), manifest.get("kind")
    banners = banner_texts(banner_kinds(manifest_bytes(manifest), metrics))
    values = {path: v for path, v in numbers(metrics) if path}
    samples = [_sample(i, r) for i, r in enumerate(records, 1)]
    models = sorted({str(r.get(k)) for r in records for k in ("model", "responder", "system", "chatbot")
                     if r.get(k)})
    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), Mapping) else {}
    spec = EvalSpec(
        created=str(manifest.get("created") or datetime.now(UTC).isoformat()),
        task=f"carebench/{suite}" + (f"-{kind}" if kind else ""),
        dataset=EvalDataset(name=str(dataset.get("name") or suite), location=str(dataset.get("source") or ""),
                            samples=len(records)),
        model=", ".join(models) or "none", config=EvalConfig(),
        metadata={"carebench": {"suite": suite, "kind": kind, "run_dir": str(run_dir), "banners": banners,
                                "seeds": manifest.get("seeds"), "exported_from": "records.jsonl",
                                "carebench_version": (manifest.get("versions") or {}).get("carebench"),
                                "inspect_log_version": INSPECT_LOG_VERSION}},
    )
    results = EvalResults(total_samples=len(records), completed_samples=len(records), scores=[EvalScore(
        name="carebench", scorer="carebench", scored_samples=len(records),
        metrics={path: EvalMetric(name=path, value=v) for path, v in values.items()})])
    return EvalLog(version=INSPECT_LOG_VERSION, status="success", eval=spec, results=results, samples=samples)


def write_log(run_dir: Path, out: Path) -> Path:
    """Write ``run_dir`` as an Inspect ``.eval`` log at ``out`` (a temporary file renamed into place)."""
    from inspect_ai.log import write_eval_log

    if out.suffix != ".eval":
        raise CarebenchError(f"--out {out}: an Inspect log file ends in .eval")
    log = eval_log(run_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.partial.eval")
    write_eval_log(log, str(tmp))
    os.replace(tmp, out)
    return out

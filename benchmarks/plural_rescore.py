"""Time plural-suite re-scoring of a paper-scale run from its files (no inference).

VEILED-SH (§5.3, Appendix D): 2,001 sampled prompts x 5 systems x 2 archetype
instructions = 20,010 responses; each is scored by 3 judges against the 3
profiles of its archetype (6 profiles in all) = 180,090 verdicts. This script
writes such a run directory (prompts.jsonl, policies.jsonl, records.jsonl,
manifest.json) with synthetic records, then times, separately:

1. parsing the records into the dense jury arrays,
2. scoring + every analysis (cells with B = 2,000 cluster-bootstrap intervals,
   Table 15, context and severity breakdowns, judge robustness),
3. the whole ``rescore`` (files -> metrics.json + report with every figure drawn),

first from records.jsonl alone (a run written before records.parquet), then with the
records.parquet a run now writes beside it; it checks that a second rescore reproduces
metrics.json byte for byte and that both give byte-identical metrics.json and reports.
Goals: parse from Parquet <= 0.3 s, rescore <= 2x the parse (printed as a ratio).
Target: step 3 under 10 s. Usage: ``python benchmarks/plural_rescore.py [--B 2000] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from carebench.plural.commands.run import rescore
from carebench.plural.config import compute_metrics, load_run
from carebench.plural.records import PARQUET_COLUMNS, read_jury_columns
from carebench.records_parquet import write_records_parquet

CONTEXTS = ("forum", "counselor_chat", "platform_search", "triage")
CATEGORIES = tuple(f"RESPONSE_{i}" for i in range(1, 7))
PROFILES = {"P1": "peer", "P2": "peer", "P3": "peer", "C1": "clinician", "C2": "clinician", "C3": "clinician"}
SYSTEMS = ("openai:system-a", "anthropic:system-b", "openai:system-c@http://127.0.0.1:1/v1",
           "openai:system-d@http://127.0.0.1:2/v1", "openai:system-e@http://127.0.0.1:3/v1")
JUDGES = ("openai:judge-x@http://127.0.0.1:4/v1", "openai:judge-y@http://127.0.0.1:5/v1",
          "openai:judge-z@http://127.0.0.1:6/v1")


def _dump(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def make_run(run_dir: Path, n_prompts: int = 2001, seed: int = 0, B: int = 2000) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    prompts = []
    for i in range(n_prompts):
        prompts.append({
            "id": f"vs-{i:05d}", "source_id": f"src-{i // 2:05d}", "source_group": f"group-{i % 5}",
            "context": CONTEXTS[i % 4],
            "persona": {"text": "A synthetic persona for timing.", "attributes": {"age_band": "18-24"}},
            "text": f"Synthetic prompt {i} for the re-scoring benchmark.", "rewriter": None,
        })
    policies = []
    for p in prompts:
        for prof, arch in PROFILES.items():
            resp = [c for c in CATEGORIES if rng.random() < 0.3] or ["RESPONSE_2"]
            nssi = int(rng.integers(0, 6)) or None
            sui = int(rng.integers(0, 6)) or None
            policies.append({"prompt_id": p["id"], "profile": prof, "archetype": arch,
                             "intent": ["INTENT_2" if nssi else "INTENT_1"] + (["INTENT_3"] if sui else []),
                             "nssi_severity": nssi, "suicidal_severity": sui,
                             "function": ["FUNCTION_1"], "response": resp})
    _dump(run_dir / "prompts.jsonl", prompts)
    _dump(run_dir / "policies.jsonl", policies)
    skill = np.linspace(0.6, 0.9, len(SYSTEMS))
    n_resp = n_ver = 0
    with (run_dir / "records.jsonl").open("w", encoding="utf-8") as fh:
        for s, sys_ in enumerate(SYSTEMS):
            for arch in ("peer", "clinician"):
                for p in prompts:
                    fh.write(json.dumps({"kind": "response", "system": sys_, "archetype": arch,
                                         "prompt_id": p["id"], "status": "ok",
                                         "text": "A synthetic reply of a few sentences. " * 6,
                                         "usage": {"prompt_tokens": 300, "completion_tokens": 90},
                                         "latency_s": 1.2, "cost_usd": 0.0, "error": None}) + "\n")
                    n_resp += 1
                    for prof in (k for k, a in PROFILES.items() if a == arch):
                        for j in JUDGES:
                            ok = rng.random() > 0.002
                            cats = [c for c in CATEGORIES if rng.random() < skill[s]]
                            fh.write(json.dumps({
                                "kind": "judgment", "system": sys_, "archetype": arch, "prompt_id": p["id"],
                                "profile": prof, "judge": j, "status": "ok" if ok else "parse_error",
                                "appropriate": bool(rng.random() < 0.92) if ok else None,
                                "categories": cats if ok else [],
                                "rationale": "The reply validates the feelings and asks a gentle question.",
                            }) + "\n")
                            n_ver += 1
    manifest = {
        "suite": "plural", "kind": "run", "config": {"max_tokens": 1024, "temperature": 0.0},
        "models": [*SYSTEMS, *JUDGES], "dataset": {"illustrative": False, "sampled_prompts": n_prompts},
        "scoring": {"categories": list(CATEGORIES), "empty_policy": "vacuous", "zero_coverage": "partial",
                    "seed": 12345, "bootstrap": B, "alpha": 0.05, "judges": list(JUDGES)},
        "warnings": [],
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return {"prompts": n_prompts, "responses": n_resp, "verdicts": n_ver}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--prompts", type=int, default=2001, help="sampled prompts (default 2001)")
    ap.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        t0 = time.perf_counter()
        sizes = make_run(run_dir, args.prompts, B=args.B)
        t_make = time.perf_counter() - t0
        size_mb = (run_dir / "records.jsonl").stat().st_size / 1e6
        print(f"synthetic run: {sizes['prompts']:,} prompts, {sizes['responses']:,} responses, "
              f"{sizes['verdicts']:,} verdicts ({size_mb:.0f} MB records.jsonl), written in {t_make:.1f} s")
        def timed(fn):
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            return out, time.perf_counter() - t0, time.process_time() - c0

        def parse():
            files = load_run(run_dir)
            return files, files.jury_data()

        outputs = ("metrics.json", "report.md", "report.html")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"machine: {os.cpu_count()} cores, load average {load:.1f} (wall time grows with contention)")
        results = {}
        for label in ("records.jsonl only (an older run)", "records.parquet"):
            if label == "records.parquet":
                t0 = time.perf_counter()
                lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
                write_records_parquet(run_dir, [json.loads(x) for x in lines], lines, PARQUET_COLUMNS)
                print(f"records.parquet written ({(run_dir / 'records.parquet').stat().st_size / 1e6:.0f} MB) "
                      f"in {time.perf_counter() - t0:.1f} s")
            categories = json.loads((run_dir / "manifest.json").read_text())["scoring"]["categories"]
            _, w_rec, c_rec = timed(functools.partial(read_jury_columns, run_dir / "records.jsonl", categories,
                                                      {"vs-00000"}))
            (files, data), w_parse, c_parse = timed(parse)
            _, w_score, c_score = timed(functools.partial(compute_metrics, data, files.manifest["scoring"]))
            shutil.rmtree(run_dir / "figures", ignore_errors=True)
            _, w_all, c_all = timed(lambda: rescore(run_dir))
            results[label] = {name: (run_dir / name).read_bytes() for name in outputs}
            _, w_again, c_again = timed(functools.partial(rescore, run_dir))  # the run's figures in place
            same = (run_dir / "metrics.json").read_bytes() == results[label]["metrics.json"]
            print(f"-- from {label}, load average {os.getloadavg()[0]:.1f}")
            print(f"1a. parse the records -> jury columns:            {w_rec:6.2f} s wall, {c_rec:6.2f} s CPU"
                  + ("  (goal <= 0.3 s: " + ("met" if w_rec <= 0.3 else "missed") + " on wall, "
                     + ("met" if c_rec <= 0.3 else "missed") + " on CPU)" if label == "records.parquet" else ""))
            print(f"1. parse files (+ prompts, policies) -> jury arrays: {w_parse:6.2f} s wall, {c_parse:6.2f} s CPU")
            print(f"2. scoring + analyses (B={args.B}):              {w_score:6.2f} s wall, {c_score:6.2f} s CPU")
            print(f"3. full rescore (files -> metrics.json + report): {w_all:6.2f} s wall, {c_all:6.2f} s CPU"
                  f"  (target < 10 s: {'met' if w_all < 10 else 'missed'} on wall time)")
            print(f"4. rescore again, the run's figures reused:       {w_again:6.2f} s wall, {c_again:6.2f} s CPU")
            print(f"   rescore / parse of the files = {w_all / w_parse:.1f}x wall, {c_all / max(c_parse, 1e-9):.1f}x CPU"
                  f" (every chart drawn), {w_again / w_parse:.1f}x wall, {c_again / max(c_parse, 1e-9):.1f}x CPU"
                  " (figures reused); goal <= 2x")
            print(f"second rescore reproduces metrics.json byte for byte: {same}")
        a, b = results.values()
        print("Parquet and JSONL give byte-identical " + ", ".join(
            f"{name}: {a[name] == b[name]}" for name in outputs))


if __name__ == "__main__":
    main()

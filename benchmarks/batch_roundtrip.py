"""Batch mode at paper scale: export and import of N pending chat requests (default 1,000,000).

Export: the batch sink takes N calls the cache cannot answer (``BatchSink.add``, what the
runner does per call) and writes the round (request bodies built by the live client's
``chat_body``, grouping, splitting at 50,000 requests / 200 MB, SHA-256, id files,
manifest). Its yardstick is a bare loop that does only the same JSON serialization and
file writes of the same, pre-built lines.

Import: ``import_results`` reads the fake run_batch output of every file, checks every
line against the request files, builds each answer's cache row (what the cache stores of
the live client's parse of the same body, written directly for documented chat bodies),
prices it and stores all in the cache in one transaction. Its yardstick is a
bare loop that does only the same SQLite inserts (pre-built rows) in one transaction.

The cache key of each call (``call_key``, computed by the runner in live and batch mode
alike) is timed on its own. Each phase is reported as wall time and as the process's
CPU time (on a shared machine the wall time mostly measures the other tenants), with
the load average::

    python benchmarks/batch_roundtrip.py            # 1,000,000 requests
    python benchmarks/batch_roundtrip.py --n 20000  # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

clock = time.perf_counter
cpu = time.process_time

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from carebench.batch.export import BatchSink
from carebench.batch.import_ import import_results
from carebench.batch.manifest import Manifest
from carebench.batch.options import BatchOptions
from carebench.engine.cache import CompletionCache
from carebench.engine.runner import Call, call_key
from carebench.models import get_model
from carebench.types import ChatRequest, Message

SYSTEM = Message("system", "You are a careful rater of how a reply to a person in distress meets one "
                           "criterion. Answer yes or no, then one sentence of reasons.")


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"


def _calls(n: int) -> list[Call]:
    model = get_model("openai:gpt-4o-mini@http://127.0.0.1:9/v1", planning=True)
    return [Call(model, ChatRequest((SYSTEM, Message("user", f"Reply {i}: I hear how hard this week has "
                                                              f"been, and I am here with you. Criterion "
                                                              f"{i % 31}: does it name a crisis line?")),
                                    max_tokens=64))
            for i in range(n)]


def _answer(i: int) -> dict:
    return {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 1764633600, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "yes: it names a line."},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 60, "completion_tokens": 7, "total_tokens": 67}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.n
    tmp = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    print(f"{n:,} pending chat requests; {_load()}")
    calls = _calls(n)

    t, t_cpu = clock(), cpu()
    keys = [call_key(c) for c in calls]
    t_keys, t_keys_cpu = clock() - t, cpu() - t_cpu

    sink = BatchSink(BatchOptions(tmp / "bdir"))
    sink._outstanding = set()  # a fresh directory: nothing of earlier rounds to look up
    t, t_cpu = clock(), cpu()
    for c, k in zip(calls, keys, strict=True):
        sink.add(c, k)
    sink.write(command=["benchmark"])
    t_export, t_export_cpu = clock() - t, cpu() - t_cpu
    m = Manifest.load(tmp / "bdir")
    files = [f for _, f in m.files()]

    # the bare loop: the same lines, pre-built, only serialized and written
    lines = [json.loads(x) for f in files[:1] for x in (tmp / "bdir" / f["path"]).read_text().splitlines()]
    per_file = len(lines)
    bare_dir = tmp / "bare"
    bare_dir.mkdir()
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    t, t_cpu = clock(), cpu()
    written = 0
    part = 0
    while written < n:
        part += 1
        chunk = lines[: min(per_file, n - written)]
        with (bare_dir / f"{part}.jsonl").open("wb") as fh:
            fh.write(b"".join((dumps(o) + "\n").encode("utf-8") for o in chunk))
        written += len(chunk)
    t_bare_export, t_bare_export_cpu = clock() - t, cpu() - t_cpu
    del lines

    # fake run_batch output for every file (not timed)
    outs = []
    for f in files:
        ids = m.ids(f)
        p = tmp / "out" / (Path(f["path"]).stem + ".output.jsonl")
        p.parent.mkdir(exist_ok=True)
        with p.open("w") as fh:
            for j, cid in enumerate(ids):
                fh.write(json.dumps({"id": f"vllm-{j}", "custom_id": cid, "response": {
                    "status_code": 200, "request_id": f"r{j}", "body": _answer(j)}, "error": None}) + "\n")
        outs.append(p)
    del calls, sink

    # not a yardstick the goal names, but the floor under any import: reading the lines at all
    t, t_cpu = clock(), cpu()
    for p in outs:
        with p.open(encoding="utf-8") as fh:
            for line in fh:
                json.loads(line)
    t_parse, t_parse_cpu = clock() - t, cpu() - t_cpu

    cache = CompletionCache(tmp / "cache.sqlite")
    t, t_cpu = clock(), cpu()
    counts = import_results(tmp / "bdir", outs, cache)
    t_import, t_import_cpu = clock() - t, cpu() - t_cpu
    assert counts.imported == n, counts.line()

    from carebench.batch.formats import completion_from

    blob = json.dumps(completion_from("/v1/chat/completions", "openai:gpt-4o-mini", _answer(0)).to_dict(),
                      ensure_ascii=False)
    rows = [(k, "openai:gpt-4o-mini", blob) for k in keys]
    conn = sqlite3.connect(tmp / "bare.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE completions (key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL,"
                 " created REAL DEFAULT (unixepoch('subsec')))")
    t, t_cpu = clock(), cpu()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT OR IGNORE INTO completions (key, model, completion) VALUES (?, ?, ?)", rows)
    conn.execute("COMMIT")
    t_bare_import, t_bare_import_cpu = clock() - t, cpu() - t_cpu

    size = sum(f["bytes"] for f in files) / 1e6
    print(f"cache keys:  wall {t_keys:7.2f} s, cpu {t_keys_cpu:7.2f} s ({t_keys_cpu / n * 1e6:.1f} us per "
          "call; the runner computes them in live mode too)")
    print(f"export:      wall {t_export:7.2f} s, cpu {t_export_cpu:7.2f} s; {len(files)} files, {size:,.0f} MB")
    print(f"  bare serialize+write: wall {t_bare_export:.2f} s, cpu {t_bare_export_cpu:.2f} s; ratio wall "
          f"{t_export / t_bare_export:.2f}x, cpu {t_export_cpu / t_bare_export_cpu:.2f}x")
    print(f"import:      wall {t_import:7.2f} s, cpu {t_import_cpu:7.2f} s; {counts.line()}")
    print(f"  bare SQLite inserts:  wall {t_bare_import:.2f} s, cpu {t_bare_import_cpu:.2f} s; ratio wall "
          f"{t_import / t_bare_import:.2f}x, cpu {t_import_cpu / t_bare_import_cpu:.2f}x")
    print(f"  json.loads of every result line alone: wall {t_parse:.2f} s, cpu {t_parse_cpu:.2f} s")
    print(f"after: {_load()}")
    import shutil

    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Latency of a label submission under load: N annotators (default 20) each submit
criterion labels to one ``carebench annotate serve`` process as fast as they can,
following the redirect to their next case as a browser does.

Prints the p50/p95/p99 latency of one submit (the POST that commits the label and
answers with the redirect, so it includes the SQLite WAL commit with
``synchronous=FULL``), the throughput, and checks that every label arrived once.
Run it alone: other CPU load on a 2-core machine changes every figure.

    python benchmarks/annotate_load.py [--clients 20] [--labels 50] [--db-dir DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from annotate.harness import ServerProcess, concurrent_submissions, criterion_rows
from carebench.annotate.store import Store


def commit_floor(directory: Path, n: int = 200) -> float:
    """Seconds per bare SQLite commit (WAL, synchronous=FULL) in ``directory``: the
    disk's fsync cost, which bounds how many labels per second can be made durable."""
    con = sqlite3.connect(directory / "floor.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (x INTEGER)")
    t0 = time.perf_counter()
    for i in range(n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t VALUES (?)", (i,))
        con.execute("COMMIT")
    con.close()
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--labels", type=int, default=50, help="labels per client")
    ap.add_argument("--db-dir", type=Path, default=None, help="where the SQLite file goes (default: tmp)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(dir=args.db_dir) as tmp:
        db = Path(tmp) / "bench.sqlite"
        settings = Path(tmp) / "settings.yaml"
        settings.write_text(f"session_cases: {args.labels + 1}\n")
        store = Store(db)
        store.add_project("bench", "criterion", [(r["item_id"], r) for r in criterion_rows(args.labels)])
        tokens = {f"C{i:03d}": store.add_annotator(f"C{i:03d}", "clinician")[0] for i in range(args.clients)}
        store.close()
        with ServerProcess(db, settings) as server:
            res = concurrent_submissions(server.url, tokens, args.labels, lambda name, aid: aid % 2 == 0)
        with sqlite3.connect(db) as con:
            stored = con.execute("SELECT count(*) FROM labels").fetchone()[0]
        floor = commit_floor(Path(tmp))

    lat = np.array(res["latencies"]) * 1000
    expected = args.clients * args.labels
    print(f"annotate submit under load: {args.clients} concurrent clients x {args.labels} labels")
    print(f"  submits        {len(lat)} (failures {len(res['failures'])})")
    print(f"  latency p50    {np.percentile(lat, 50):.1f} ms")
    print(f"  latency p95    {np.percentile(lat, 95):.1f} ms")
    print(f"  latency p99    {np.percentile(lat, 99):.1f} ms")
    print(f"  throughput     {len(lat) / res['wall']:.0f} submits/s over {res['wall']:.1f} s "
          "(each client also loads its next case page)")
    print(f"  stored labels  {stored} of {expected} {'ok' if stored == expected else 'MISMATCH'}")
    print(f"  disk floor     {floor * 1000:.1f} ms per durable SQLite commit "
          f"(at most {1 / floor:.0f} labels/s on this disk)")


if __name__ == "__main__":
    main()

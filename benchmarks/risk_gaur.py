"""Wall time and peak memory of the risk run on the Gaur et al. (2019) Reddit C-SSRS CSV.

Runs, in a child process so its peak resident memory can be read afterwards::

    carebench risk run --data ../shared/data/gaur2019/500_Reddit_users_posts_labels.csv \
        --format gaur --method tfidf-lr --method embed-lr

and prints the wall time, the child's peak RSS (resource.getrusage RUSAGE_CHILDREN) and
the resulting Table 2. ``--tracemalloc`` instead runs in-process and also reports the
peak of Python-level allocations (tracemalloc; slower, and blind to torch's native
memory). Usage: ``python benchmarks/risk_gaur.py [--data CSV] [--out DIR] [--method M ...]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "gaur2019" / "500_Reddit_users_posts_labels.csv"
KEYS = ("accuracy", "macro_f1", "weighted_f1", "qwk", "mae", "adjacent_accuracy", "high_risk_f1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--method", action="append", default=None)
    ap.add_argument("--tracemalloc", action="store_true")
    args = ap.parse_args()
    if not args.data.is_file():
        print(f"data not found: {args.data} (skipping)", file=sys.stderr)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="carebench-bench-gaur-")) / "run"
    methods = args.method or ["tfidf-lr", "embed-lr"]
    argv = ["risk", "run", "--data", str(args.data), "--format", "gaur", "--out", str(out),
            "--cache", str(out.parent / "cache.db")]
    for m in methods:
        argv += ["--method", m]

    t0 = time.perf_counter()
    if args.tracemalloc:
        import tracemalloc

        from carebench.cli import main as cli_main

        tracemalloc.start()
        rc = cli_main(argv)
        _, peak_py = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        wall = time.perf_counter() - t0
        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        extra = f", peak Python allocations {peak_py / 2**20:.1f} MiB (tracemalloc)"
    else:
        rc = subprocess.call([sys.executable, "-m", "carebench.cli", *argv])
        wall = time.perf_counter() - t0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_rss_mb = ru.ru_maxrss / 1024
        extra = f", CPU time {ru.ru_utime + ru.ru_stime:.1f} s (user+sys; wall depends on load)"
    if rc != 0:
        print(f"run failed with exit code {rc}", file=sys.stderr)
        return rc
    metrics = json.loads((out / "metrics.json").read_text())
    print(f"\nrisk gaur benchmark: methods {', '.join(methods)}")
    print(f"wall time {wall:.1f} s, peak RSS {peak_rss_mb:.0f} MiB{extra}")
    print(f"n = {metrics['n']}: " + ", ".join(f"{k} {v}" for k, v in metrics["label_counts"].items()))
    print(f"{'method':<10} " + " ".join(f"{k[:8]:>9}" for k in KEYS))
    print(f"{'chance':<10} " + " ".join(f"{metrics['chance'][k]:9.3f}" for k in KEYS))
    for name, e in metrics["methods"].items():
        print(f"{name:<10} " + " ".join(f"{e[k]['value']:9.3f}" for k in KEYS))
        print(f"{'':<10} " + " ".join(f"[{e[k]['ci'][0]:.2f},{e[k]['ci'][1]:.2f}]" for k in KEYS))
    print(f"run directory: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

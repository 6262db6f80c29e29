"""Runner throughput against the loopback stub: carebench's runner vs a raw aiohttp loop.

2,000 chat calls, 50 ms server latency, concurrency 64 (the latency-bound ideal is
2000 x 0.05 / 64 = 1.56 s). Three clients, measured in turn in every round (the order
rotates so none always runs first), each against the same stub:

- ``raw aiohttp``: one pooled ``aiohttp.ClientSession``, a semaphore, POST, read, decode;
  the floor a runner is compared with;
- ``runner (Run.calls)``: today's runner the way every suite uses it, through the run
  context, with the cache on (a fresh SQLite file per round) and the call log;
- ``d2decf4 runner``: the runner as of commit d2decf4 (loaded from git into a temporary
  module, with today's models, cache and types), with a fresh cache and its
  ``call_records()`` rows, so it does the same work.

It prints each client's median wall time, median wall ratio to the raw loop of the same
round, and CPU per call (median and minimum; ``time.process_time`` of this process; the
stub runs in a child process, so its CPU is not counted), with the load average beside
each round.
The machine may be shared: read the ratios with the load average.

    python benchmarks/runner_throughput.py [--calls 2000] [--concurrency 64] [--latency 0.05]
                                           [--rounds 5] [--progress]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "d2decf4"

STUB = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from stub_server import StubReply, StubServer
lat = float(sys.argv[2])
with StubServer() as stub:
    stub.handler = lambda r: StubReply(content="ok", delay=lat, usage=(20, 1))
    print(stub.base_url, flush=True)
    sys.stdin.read()
"""

Result = tuple[float, float, int]  # wall s, CPU s, calls answered ok


def start_stub(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUB, str(ROOT / "tests"), str(latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    url = proc.stdout.readline().strip()
    return proc, url


def load_old_runner(tmp: Path):
    """The runner module as of ``OLD_COMMIT``, imported under another name; None if git
    cannot show it or it no longer imports against today's types."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:src/carebench/runner.py"],
                             capture_output=True, text=True, check=True).stdout
        src = src.replace("from carebench.run import", "from carebench.engine.run import")
        src = src.replace("from carebench.runner import", "from carebench.engine.runner import")
        src = src.replace("from carebench.run_options import", "from carebench.engine.options import")
        src = src.replace("from carebench.rundir import", "from carebench.engine.rundir import")
        src = src.replace("from carebench.experiment import", "from carebench.engine.skeleton import")
        src = src.replace("from carebench.planning import", "from carebench.engine.planning import")
        src = src.replace("from carebench.cache import", "from carebench.engine.cache import")
        path = tmp / "runner_d2decf4.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("runner_d2decf4", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(mod)
        return mod
    except Exception as e:  # noqa: BLE001 - reported, then compared against the raw loop only
        print(f"the {OLD_COMMIT} runner cannot be loaded ({type(e).__name__}: {e}); "
              "comparing against the raw loop only")
        return None


def prompts(n: int, tag: str) -> list[str]:
    return [f"{tag} item {i}" for i in range(n)]


def timed(fn: Callable[[], int]) -> Result:
    c0, t0 = time.process_time(), time.perf_counter()
    ok = fn()
    return time.perf_counter() - t0, time.process_time() - c0, ok


def bench_raw(url: str, n: int, conc: int, tag: str, progress: bool) -> Result:
    import aiohttp

    texts = prompts(n, tag)

    async def go() -> int:
        sem = asyncio.Semaphore(conc)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as session:

            async def one(text: str) -> bool:
                body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": text}],
                                   "temperature": 0.0, "max_tokens": 8}).encode()
                async with sem, session.post(f"{url}/chat/completions", data=body,
                                             headers={"content-type": "application/json"}) as r:
                    data = json.loads(await r.read())
                return data["choices"][0]["message"]["content"] == "ok"

            return sum(await asyncio.gather(*(one(t) for t in texts)))

    return timed(lambda: asyncio.run(go()))


def bench_run_calls(url: str, n: int, conc: int, tag: str, progress: bool, cache: Path) -> Result:
    from carebench.engine.options import RunOptions
    from carebench.engine.run import Run
    from carebench.engine.runner import Call
    from carebench.types import ChatRequest, messages

    with Run(RunOptions(concurrency=conc, progress=progress, cache_path=cache)) as run:
        model = run.model(f"openai:bench@{url}")
        calls = [Call(model, ChatRequest(messages(("user", t)), max_tokens=8)) for t in prompts(n, tag)]

        def go() -> int:
            res = run.calls(calls, "bench", stage="bench")
            return sum(1 for c in res.completions if c is not None and c.ok)

        out = timed(go)
        assert len(run.call_rows) == n
    run.cache.close()
    return out


def bench_old(old, url: str, n: int, conc: int, tag: str, progress: bool, cache: Path) -> Result:
    from carebench.engine.cache import CompletionCache
    from carebench.models import get_model
    from carebench.types import ChatRequest, messages

    model = get_model(f"openai:bench@{url}", concurrency=conc)
    calls = [old.Call(model, ChatRequest(messages(("user", t)), max_tokens=8)) for t in prompts(n, tag)]
    store = CompletionCache(cache)
    runner = old.Runner(old.RunnerConfig(concurrency=conc, progress=progress), cache=store)

    def go() -> int:
        res = runner.run_sync(calls)
        rows = res.call_records()  # what its callers then wrote to calls.jsonl
        assert len(rows) == n
        return sum(1 for c in res.completions if c is not None and c.ok)

    out = timed(go)
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--progress", action="store_true", help="runners show their progress bar (stderr)")
    args = ap.parse_args()
    n, conc, lat = args.calls, args.concurrency, args.latency
    sys.path.insert(0, str(ROOT / "src"))
    ideal = n * lat / conc
    proc, url = start_stub(lat)
    results: dict[str, list[Result]] = {}
    ratios: dict[str, list[float]] = {}
    loads: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp_s:
            tmp = Path(tmp_s)
            old = load_old_runner(tmp)
            clients: dict[str, Callable[[str], Result]] = {
                "raw aiohttp": lambda tag: bench_raw(url, n, conc, tag, args.progress),
                "runner (Run.calls)": lambda tag: bench_run_calls(url, n, conc, tag, args.progress,
                                                                  tmp / f"{tag}.sqlite"),
            }
            if old is not None:
                clients[f"{OLD_COMMIT} runner"] = lambda tag: bench_old(old, url, n, conc, tag, args.progress,
                                                                          tmp / f"{tag}.sqlite")
            names = list(clients)
            bench_raw(url, 200, conc, "warm-up", False)  # connections, imports, JIT-free warm caches
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                walls: dict[str, float] = {}
                for i, name in enumerate(order):
                    res = clients[name](f"r{r}c{i}")
                    if res[2] != n:
                        raise SystemExit(f"{name}: only {res[2]} of {n} calls answered ok")
                    results.setdefault(name, []).append(res)
                    walls[name] = res[0]
                load = os.getloadavg()[0]
                loads.append(load)
                for name in names[1:]:
                    ratios.setdefault(name, []).append(walls[name] / walls[names[0]])
                print(f"round {r + 1}: " + ", ".join(f"{k} {walls[k]:.2f} s" for k in names)
                      + f"; load average {load:.2f}", flush=True)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    la = os.getloadavg()
    print(f"\n{n} calls, {lat * 1000:.0f} ms server latency, concurrency {conc}, {args.rounds} rounds "
          f"interleaved; ideal {ideal:.2f} s; progress {'on' if args.progress else 'off'}")
    print(f"load average during the rounds: median {statistics.median(loads):.2f} "
          f"(min {min(loads):.2f}, max {max(loads):.2f}); now {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} "
          f"on {os.cpu_count()} CPUs")
    raw_cpu = statistics.median(c for _, c, _ in results[names[0]]) / n
    print(f"{'client':<22}{'wall s':>8}{'x raw':>8}{'(min-max)':>13}{'CPU us/call':>13}{'over raw':>10}"
          f"{'CPU min':>9}")
    for name in names:
        wall = statistics.median(w for w, _, _ in results[name])
        cpu = statistics.median(c for _, c, _ in results[name]) / n
        if name in ratios:
            rs = ratios[name]
            ratio = f"{statistics.median(rs):>8.3f}{f'({min(rs):.2f}-{max(rs):.2f})':>13}"
        else:
            ratio = f"{1.0:>8.3f}{'':>13}"
        cpu_min = min(c for _, c, _ in results[name]) / n
        print(f"{name:<22}{wall:>8.2f}{ratio}{cpu * 1e6:>13.0f}{(cpu - raw_cpu) * 1e6:>10.0f}{cpu_min * 1e6:>9.0f}")


if __name__ == "__main__":
    main()

"""Runner throughput against the loopback stub: carebench's runner vs a bare openai client.

2,000 chat calls, 50 ms server latency, concurrency 64. The latency-bound ideal is
2000 x 0.05 / 64 = 1.56 s. The stub runs in its own process so the client's CPU
time per call (the overhead that separates a runner from the ideal) is measured alone.

    python benchmarks/runner_throughput.py [--calls 2000] [--concurrency 64] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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


def start_stub(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUB, str(ROOT / "tests"), str(latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    url = proc.stdout.readline().strip()
    return proc, url


def bench_carebench(url: str, n: int, conc: int, cache_dir: Path) -> tuple[float, float, int]:
    from carebench.cache import CompletionCache
    from carebench.models import get_model
    from carebench.runner import Call, Runner, RunnerConfig
    from carebench.types import ChatRequest, messages

    model = get_model(f"openai:bench@{url}", concurrency=conc)
    calls = [Call(model, ChatRequest(messages(("user", f"item {i}")), max_tokens=8)) for i in range(n)]
    runner = Runner(
        RunnerConfig(concurrency=conc, progress=False),
        cache=CompletionCache(cache_dir / "bench.sqlite"),
    )
    c0, t0 = time.process_time(), time.perf_counter()
    res = runner.run_sync(calls)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ok = sum(1 for c in res.completions if c is not None and c.ok)
    return wall, cpu, ok


def bench_openai_sdk(url: str, n: int, conc: int) -> tuple[float, float, int]:
    import openai

    async def go() -> int:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-bench", max_retries=0)
        sem = asyncio.Semaphore(conc)

        async def one(i: int) -> bool:
            async with sem:
                r = await client.chat.completions.create(
                    model="bench", messages=[{"role": "user", "content": f"item {i}"}], max_tokens=8
                )
                return bool(r.choices[0].message.content)

        try:
            return sum(await asyncio.gather(*(one(i) for i in range(n))))
        finally:
            await client.close()

    c0, t0 = time.process_time(), time.perf_counter()
    ok = asyncio.run(go())
    return time.perf_counter() - t0, time.process_time() - c0, ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    args = ap.parse_args()
    n, conc, lat = args.calls, args.concurrency, args.latency
    ideal = n * lat / conc
    proc, url = start_stub(lat)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            cb = bench_carebench(url, n, conc, Path(tmp))
            sdk = bench_openai_sdk(url, n, conc)
            rows = [("carebench runner", *cb), ("bare openai AsyncOpenAI", *sdk)]
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    print(f"{n} calls, {lat * 1000:.0f} ms server latency, concurrency {conc}; ideal {ideal:.2f} s")
    print(f"{'client':<26}{'wall s':>8}{'calls/s':>9}{'x ideal':>9}{'CPU ms/call':>13}{'ok':>6}")
    for name, wall, cpu, ok in rows:
        print(f"{name:<26}{wall:>8.2f}{n / wall:>9.0f}{wall / ideal:>9.2f}{cpu / n * 1000:>13.2f}{ok:>6}")
    print(f"speed-up of carebench over the bare SDK: {rows[1][1] / rows[0][1]:.2f}x wall, "
          f"{rows[1][2] / rows[0][2]:.2f}x CPU per call")


if __name__ == "__main__":
    main()

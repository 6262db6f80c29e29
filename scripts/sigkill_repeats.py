"""Kill a run with SIGKILL at chosen moments, re-run it, and count the calls it pays for twice.

A completed call is one whose answer (HTTP 200) the loopback stub had written to the
socket before the kill; the re-run must not send it again if the answer reached the
socket more than ``--grace`` seconds (default 0.1) before the kill: the runner makes an
answer durable (committed to the SQLite cache) within that time of its arrival. The stub
logs when it sent each answer (``StubRequest.sent``, the same monotonic clock the kill
is timed on), so the count needs nothing from carebench's own records.

    PYTHONPATH=src:tests python scripts/sigkill_repeats.py plural --kills 20
    PYTHONPATH=src:tests python scripts/sigkill_repeats.py construct --kills 20

Trials go on until ``--kills`` runs were killed (a run that finishes before its moment
is shown and tried again with a new one, at most 3 x ``--kills`` trials). Each trial starts from an empty cache, kills the run at a moment drawn uniformly over a
full run's duration counted from its first answer (start-up time varies with the load;
every third trial at a moment inside the run's longest stretch with no answer sent after
that: its slowest CPU step while or after calls are made), then re-runs it to completion.

Measured 3 Dec 2026 (each answer held 0.2 s, 2-core VM), after the writer-thread commit:
plural run 20 killed in 23 trials (load average 0.5-1.2), construct build 20 killed in
21 trials (load average 4.6-5.8): 0 calls repeated whose answer was sent more than
100 ms before the kill; every repeat was a call still in flight or answered < 100 ms
before the kill.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "plural"),
                str(ROOT / "tests" / "construct")]

from stub_server import StubServer

SRC = str(ROOT / "src")  # the carebench the runs import (``--src``: e.g. an older checkout)
DELAY = 0.0  # seconds the stub waits before each answer (``--delay``)


def _delayed(handler):
    """The handler with every reply held ``DELAY`` seconds (a server's generation time)."""
    from stub_server import StubReply

    def answer(req):
        r = handler(req)
        r = StubReply(content=r) if isinstance(r, str) else (r or StubReply())
        r.delay = max(r.delay, DELAY)
        return r
    return answer


def _canon(req) -> str:
    return req.path + " " + json.dumps(req.body, sort_keys=True)


def plural_job(tmp: Path, url: str) -> tuple[list[str], object]:
    from jury_stub import Scripted, write_release

    release = write_release(tmp / "release")
    judges = [x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{url}")]
    args = ["plural", "run", "--release", str(release), "--system", f"openai:sys-a@{url}",
            "--system", f"openai:sys-b@{url}", *judges, "--sample-size", "3", "--bootstrap", "2000",
            "--concurrency", "2"]
    return args, Scripted()


def construct_job(tmp: Path, url: str) -> tuple[list[str], object]:
    import yaml
    from construct_stub import Pipeline

    m = lambda name: f"openai:{name}@{url}"
    cfg = {"router": m("router"), "judge": m("judge"), "rewriters": [m("good"), m("leaky"), m("badformat"), m("plain")],
           "literals": str(tmp / "literals.txt"), "embedder": "hashing", "topics": 3}
    (tmp / "literals.txt").write_text("forum_sg\n", "utf-8")
    (tmp / "build.yaml").write_text(yaml.safe_dump(cfg), "utf-8")
    return ["construct", "build", "--config", str(tmp / "build.yaml"), "--concurrency", "2"], Pipeline()


JOBS = {"plural": plural_job, "construct": construct_job}


def _start(args: list[str], cache: Path, out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=SRC, CAREBENCH_PROGRESS_EVERY="0")
    return subprocess.Popen([sys.executable, "-m", "carebench", *args, "--cache", str(cache), "--out", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def full_run(job: str, tmp: Path) -> tuple[float, float, float]:
    """A full run, timed from its first answer sent: how long calls and work go on after it,
    and the longest stretch after it with no answer sent (start, end): its slowest CPU step."""
    tmp.mkdir(parents=True, exist_ok=True)
    with StubServer() as stub:
        args, handler = JOBS[job](tmp, stub.base_url)
        stub.handler = _delayed(handler)
        p = _start(args, tmp / "full.sqlite", tmp / "full-run")
        _, err = p.communicate(timeout=900)
        t1 = time.monotonic()
        assert p.returncode == 0, err.decode()[-2000:]
        sent = sorted(r.sent for r in stub.requests if r.sent is not None)
    edges = [*sent, t1]
    gap = max(range(len(edges) - 1), key=lambda i: edges[i + 1] - edges[i])
    return t1 - sent[0], edges[gap] - sent[0], edges[gap + 1] - sent[0]


def trial(job: str, tmp: Path, kill_after: float, grace: float) -> dict:
    """One kill and re-run; the re-run's requests repeating an answer sent before kill - grace."""
    cache = tmp / "cache.sqlite"
    with StubServer() as stub:
        args, handler = JOBS[job](tmp, stub.base_url)
        stub.handler = _delayed(handler)
        p = _start(args, cache, tmp / "run1")
        deadline = time.monotonic() + 300
        while p.poll() is None and time.monotonic() < deadline and not any(
                r.sent is not None for r in stub.requests):
            time.sleep(0.002)  # the moment is counted from the first answer (start-up time varies)
        time.sleep(kill_after)
        p.send_signal(signal.SIGKILL)
        t_kill = time.monotonic()
        p.wait()
        killed = p.returncode == -signal.SIGKILL
        first = stub.requests
        answered = {}
        for r in first:
            if r.status == 200 and r.sent is not None:
                answered.setdefault(_canon(r), r.sent)
        p = _start(args, cache, tmp / "run2")
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-2000:]
        again = stub.requests[len(first):]
    repeats = [t_kill - answered[c] for c in map(_canon, again) if c in answered]
    late = [d for d in repeats if d > grace]
    return {"kill_after": kill_after, "killed": killed, "first_requests": len(first), "answered": len(answered),
            "repeats": len(repeats), "repeats_late": len(late), "worst_s": max(repeats, default=None)}


def main() -> None:
    global DELAY, SRC
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=sorted(JOBS))
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--grace", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20260714)
    ap.add_argument("--delay", type=float, default=0.2, help="seconds each answer takes (default 0.2)")
    ap.add_argument("--src", default=SRC, help="the src/ directory the killed runs import")
    a = ap.parse_args()
    DELAY, SRC = a.delay, a.src
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as d:
        duration, gap0, gap1 = full_run(a.job, Path(d) / "full")
    print(f"carebench from {SRC}; each answer held {DELAY:g} s")
    print(f"{a.job}: a full run goes on {duration:.2f} s after its first answer; longest stretch without "
          f"an answer sent after it {gap0:.2f}-{gap1:.2f} s (times from the first answer)")
    late_total = killed = i = 0
    while killed < a.kills and i < 3 * a.kills:  # a run that finished before its moment is tried again
        at = rng.uniform(gap0, gap1) if killed % 3 == 0 else rng.uniform(0.0, duration)
        with tempfile.TemporaryDirectory() as d:
            r = trial(a.job, Path(d), at, a.grace)
        killed += r["killed"]
        late_total += r["repeats_late"]
        worst = "-" if r["worst_s"] is None else f"{r['worst_s']:.3f} s"
        print(flush=True, end="")
        print(f"  kill {i + 1:2d} at first answer + {at:5.2f} s{'' if r['killed'] else ' (finished first)'}: "
              f"{r['answered']} answered, re-run repeated {r['repeats']} "
              f"({r['repeats_late']} answered > {a.grace * 1000:.0f} ms before the kill; worst {worst})")
        i += 1
    print(f"{a.job}: {killed} runs killed in {i} trials; calls repeated whose answer was sent more than "
          f"{a.grace * 1000:.0f} ms before the kill: {late_total}")
    uptime = subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip()
    print(f"uptime: {uptime}")


if __name__ == "__main__":
    main()

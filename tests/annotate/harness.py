"""Helpers for the annotate tests and benchmarks/annotate_load.py: sheets to load, a
real server process on a free loopback port, and a plain HTTP client that signs in
by link and submits forms the way a browser would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlencode

import httpx

import carebench

SRC = Path(carebench.__file__).resolve().parents[1]
SCRIPT = '<script>window.__xss = 1; document.title = "pwned"; alert(1)</script>'

POLICY_ROWS = [
    {"id": "case-1", "source_id": "src-1", "source_group": "forum", "context": "counselor_chat",
     "persona": {"text": "A 19-year-old polytechnic student who lives with her parents.",
                 "attributes": {"age": 19, "sex": "female"}},
     "text": f"everything feels too heavy lately {SCRIPT} i just want it all to stop for a while"},
    {"id": "case-2", "source_id": "src-2", "source_group": "public", "context": "forum",
     "persona": "A 45-year-old delivery driver, father of two.",
     "text": "Work has been crushing me. I snap at the kids and hate myself after."},
    {"id": "case-3", "source_id": "src-3", "source_group": "public", "context": "triage",
     "persona": "A 31-year-old nurse on night shifts.",
     "text": "I've been scratching my arms again when the shifts get bad."},
]

REVIEW_ROWS = [
    {"item_id": "rw-1", "reviewer": "R1", "source_text": "cant sleep, cant eat, whats the point of any of it",
     "persona": "A 60-year-old retiree living alone.", "context": "platform_search",
     "text": "no point sleeping or eating anymore"},
    {"item_id": "rw-1", "reviewer": "R2", "source_text": "cant sleep, cant eat, whats the point of any of it",
     "persona": "A 60-year-old retiree living alone.", "context": "platform_search",
     "text": "no point sleeping or eating anymore"},
    {"item_id": "rw-2", "reviewer": "R2", "source_text": "my exams are ruining me",
     "persona": "A 16-year-old secondary school student.", "context": "counselor_chat",
     "text": "hi, exams are wrecking me and I don't know who to tell"},
]


def criterion_rows(n: int, tasks: int = 5) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        t = i % tasks
        rows.append({
            "item_id": f"t{t}/resp-a#0/k{i}", "task_id": f"t{t}", "response_id": "resp-a#0",
            "criterion_id": f"k{i}", "criterion_text": f"The reply does thing number {i} for the user.",
            "dimension": "identification",
            "conversation": [{"role": "user", "content": f"Task {t}: I don't see the point anymore."},
                             {"role": "assistant", "content": "I'm here. What's been happening?"},
                             {"role": "user", "content": "Everything. I'm so tired of it."}],
            "reply": "That sounds exhausting. Are you safe right now? You can call a crisis line.",
        })
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``carebench annotate ARGS`` as a user would."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([sys.executable, "-m", "carebench", "annotate", *args], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    if check and res.returncode != 0:
        raise AssertionError(f"carebench annotate {' '.join(args)} failed: {res.stderr}")
    return res


def add_annotator(db: Path, name: str, role: str) -> str:
    """The personal link's token."""
    link = cli("add-annotator", "--db", str(db), "--name", name, "--role", role).stdout.strip()
    return link.rsplit("/login/", 1)[1]


class ServerProcess:
    """``carebench annotate serve`` on 127.0.0.1 and a free port, in its own process."""

    def __init__(self, db: Path, settings: Path | None = None):
        self.db, self.settings = db, settings
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        cmd = [sys.executable, "-m", "carebench", "annotate", "serve", "--db", str(self.db), "--port", "0"]
        if self.settings is not None:
            cmd += ["--settings", str(self.settings)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"on (http://[^ ]+?)/?$", line.strip())
        if not m:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise AssertionError(f"server did not start: {line!r} {err}")
        self.url = m.group(1).rstrip("/")
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("server did not answer /healthz")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown handler, no flush, nothing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')
CASE_RE = re.compile(r'href="/a/(\d+)"')


class WebClient:
    """One annotator's browser session over plain HTTP."""

    def __init__(self, base_url: str | httpx.Client, token: str, ack_notice: bool = True):
        """``base_url`` of a server, or an httpx-compatible client (Starlette's TestClient)."""
        self.http = (httpx.Client(base_url=base_url, follow_redirects=False, timeout=60)
                     if isinstance(base_url, str) else base_url)
        r = self.http.get(f"/login/{token}", follow_redirects=False)
        if r.status_code != 303:
            raise AssertionError(f"login failed: {r.status_code}")
        page = self.http.get("/notice").text
        self.csrf = CSRF_RE.search(page).group(1)
        if ack_notice:
            assert self.post("/notice", []).status_code == 303

    def case_ids(self) -> list[int]:
        """Assignment ids of the annotator's open cases, by following 'Continue' links."""
        return [int(x) for x in CASE_RE.findall(self.http.get("/").text)]

    def post(self, path: str, fields: list[tuple[str, str]], csrf: bool = True) -> httpx.Response:
        """A URL-encoded form post (repeated fields allowed, as checkboxes send them)."""
        body = urlencode(([("csrf_token", self.csrf)] if csrf else []) + list(fields))
        return self.http.post(path, content=body.encode(), follow_redirects=False,
                              headers={"content-type": "application/x-www-form-urlencoded"})

    def submit(self, assignment: int, fields: list[tuple[str, str]]) -> httpx.Response:
        return self.post(f"/a/{assignment}", fields)

    def close(self) -> None:
        self.http.close()


def concurrent_submissions(base_url: str, tokens: dict[str, str], per_client: int,
                           answer: Callable[[str, int], bool], browse: bool = True) -> dict[str, Any]:
    """Every client signs in, then all at once each submits up to ``per_client``
    criterion labels, following the redirect to its next case (and, with
    ``browse``, loading that page as a browser does).
    Returns the submissions sent (annotator, assignment, met), each submit's latency
    and any failures."""
    sent: list[tuple[str, int, bool]] = []
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(tokens))

    def work(name: str, token: str) -> None:
        client = WebClient(base_url, token)
        try:
            mine: list[float] = []
            done: list[tuple[str, int, bool]] = []
            ids = client.case_ids()
            barrier.wait()
            aid = ids[0] if ids else None
            while aid is not None and len(done) < per_client:
                met = answer(name, aid)
                t0 = time.perf_counter()
                r = client.submit(aid, [("action", "met" if met else "not_met")])
                mine.append(time.perf_counter() - t0)
                if r.status_code != 303:
                    with lock:
                        failures.append(f"{name} /a/{aid}: {r.status_code}")
                    break
                done.append((name, aid, met))
                nxt = re.fullmatch(r"/a/(\d+)", r.headers["location"])
                aid = int(nxt.group(1)) if nxt else None
                if aid is not None and browse:
                    client.http.get(f"/a/{aid}")  # the browser shows the next case
            with lock:
                latencies.extend(mine)
                sent.extend(done)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=item) for item in tokens.items()]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"sent": sent, "latencies": latencies, "failures": failures, "wall": time.perf_counter() - t0}

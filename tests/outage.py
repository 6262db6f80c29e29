"""A loopback stub server that disappears mid-run and comes back on the same port.

Verification found that a server outage was scored as the model's wrong answers. Tests
reproduce it here: ``Outage`` serves from a :class:`~stub_server.StubServer`; after
``after`` chat requests it stops the server (open connections are dropped, new ones
refused) and starts a fresh one on the same port ``down_s`` seconds later. The runner's
retry back-off is shortened by :func:`fast_retries` so that calls made during the
outage give up within the test's time (the same code path as a real 7-try give-up).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, Self

from stub_server import StubServer


def fast_retries(monkeypatch: Any) -> None:
    """Retry back-off of milliseconds (7 tries well inside a one-second outage)."""
    import carebench.engine.run as run_mod
    from carebench.engine.runner import RunnerConfig

    monkeypatch.setattr(run_mod, "RunnerConfig", functools.partial(
        RunnerConfig, backoff_base_s=0.005, backoff_max_s=0.02))


class Outage:
    """A stub that answers ``handler`` and is down from request ``after`` for ``down_s``."""

    def __init__(self, handler: Callable[[Any], Any], *, after: int, down_s: float = 1.0):
        self.handler = handler
        self.after = after
        self.down_s = down_s
        self._count = 0
        self._lock = threading.Lock()
        self._tripped = threading.Event()
        self.stubs: list[StubServer] = []
        self.down_at: float | None = None
        self.up_at: float | None = None
        self._watch: threading.Thread | None = None

    def _answer(self, req: Any) -> Any:
        with self._lock:
            self._count += 1
            if self._count == self.after:
                self._tripped.set()
        return self.handler(req)

    def _cycle(self) -> None:
        self._tripped.wait()
        time.sleep(0.05)  # let the answer that tripped it go out
        self.stubs[0].stop()
        self.down_at = time.monotonic()
        time.sleep(self.down_s)
        again = StubServer(self._answer, port=self.stubs[0].port)
        again.start()
        self.stubs.append(again)
        self.up_at = time.monotonic()

    def __enter__(self) -> Self:
        self.stubs.append(StubServer(self._answer).start())
        self._watch = threading.Thread(target=self._cycle, daemon=True)
        self._watch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._tripped.set()
        if self._watch is not None:
            self._watch.join(timeout=self.down_s + 10)
        for s in self.stubs:
            s.stop()

    @property
    def base_url(self) -> str:
        return self.stubs[0].base_url

    def chat_requests(self) -> list[Any]:
        """Every chat request any incarnation of the server received."""
        return [r for s in self.stubs for r in s.requests if r.path.endswith("/chat/completions")]

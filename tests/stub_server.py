"""Loopback stub of the OpenAI (and Anthropic) HTTP APIs that tests script per request.

Client, runner and provider tests need a real HTTP peer (keep-alive, status codes,
timeouts, dropped connections) without any network or model. ``StubServer`` is
a tiny HTTP/1.1 server on ``127.0.0.1`` built on ``asyncio.start_server`` only,
fast enough to benchmark the runner: 2,000 requests at concurrency 64 with 50 ms
latency take 1.7 s from a bare asyncio client (ideal 2000 * 0.05 / 64 = 1.56 s; the
stub spends ~0.08 ms CPU per request). Measure clients, not the stub: one
``httpx.AsyncClient`` with 64 pooled connections needs ~17-20 s for the same load,
because httpcore 1.0's pool does O(connections^2) work per request
(encode/httpcore#1035); 8 clients of 8 connections, or ``httpx2``, take ~2 s.

Typical use::

    from stub_server import StubReply, StubServer

    with StubServer() as stub:                      # serves from a daemon thread
        stub.script([StubReply(status=429, headers={"Retry-After": "0.1"}),
                      StubReply(content="I hear you.")])
        stub.on_text("rate this", StubReply(content="2", logprobs=[("2", -0.1, {"3": -2.5})]))
        stub.handler = lambda req: StubReply(delay=0.05)   # fallback for everything else
        client = openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0)
        ...
        assert stub.count(lambda r: r.path.endswith("/chat/completions")) == 2

Inside a running event loop use ``async with StubServer() as stub:`` (the server then
shares the test's loop, so only async clients may call it).

A reply for a POST endpoint is chosen in this order: the next scripted reply
(``script``), the first ``on_text`` rule whose substring occurs in the request's text,
``handler``, else the default ``StubReply()`` (an echo of the last user message).
Malformed JSON bodies (400), ``reject_json_schema`` rejections (500) and
``reasoning_endpoint`` rejections (400) are answered before any of these and consume
nothing. ``GET /v1/models`` is answered directly.
Every request, answered or not, is recorded in ``stub.requests`` with the time it arrived
and the time its answer was written to the socket (``sent``); a handler that raises
is answered with HTTP 500 and its exception kept in ``stub.errors``.

Endpoints (the ``/v1`` prefix is optional): ``POST /v1/chat/completions``,
``POST /v1/moderations``, ``POST /v1/embeddings`` (deterministic vectors, see
``stub_embedding``), ``POST /v1/messages`` (Anthropic; point the ``anthropic``
SDK at ``stub.root_url``), ``GET /v1/models``.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

try:  # orjson is ~5x faster; the stub must stay negligible next to the client.
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    def _dumps_sorted(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)

    _loads = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    import json

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def _dumps_sorted(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()

    _loads = json.loads

__all__ = ["MODERATION_CATEGORIES", "StubReply", "StubRequest", "StubServer", "stub_embedding"]

#: Category keys of OpenAI's omni moderation model, in its order.
MODERATION_CATEGORIES: tuple[str, ...] = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)

_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_calls": "tool_use",
}
_ANTHROPIC_ERROR = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_POST_ROUTES = {"/chat/completions": "chat", "/moderations": "moderation", "/messages": "messages",
                "/embeddings": "embeddings"}
#: dimensions of a stub embedding when the request names none
STUB_EMBEDDING_DIM = 8


@dataclass(slots=True)
class StubRequest:
    """One received request, as seen by handlers and kept in ``StubServer.requests``."""

    method: str
    path: str  #: without the query string, e.g. ``/v1/chat/completions``
    headers: dict[str, str]  #: lower-case keys
    body: Any  #: parsed JSON (``None`` when empty or malformed)
    raw: bytes  #: the body bytes as received
    index: int  #: global arrival index, 0-based
    n: int  #: how many earlier requests had the same path and (canonical) JSON body
    time: float  #: ``time.monotonic()`` when the full request had arrived
    conn: int = 0  #: serial number of the TCP connection it came on (shows keep-alive reuse)
    #: ``time.monotonic()`` when its answer had been written to the socket (None: not answered,
    #: e.g. dropped or hanging): durability tests compare it with the moment a client was killed
    sent: float | None = None
    status: int | None = None  #: the HTTP status of its answer (None: not answered)

    @property
    def text(self) -> str:
        """The text rules key on: last user message (chat, messages) or moderation input."""
        body = self.body
        if not isinstance(body, dict):
            return ""
        if "messages" in body:
            for msg in reversed(body.get("messages") or []):
                if isinstance(msg, dict) and msg.get("role") == "user":
                    return _content_text(msg.get("content"))
            return ""
        if "input" in body:
            inp = body["input"]
            if isinstance(inp, list):
                return "\n".join(_content_text(x) for x in inp)
            return _content_text(inp)
        return ""


@dataclass(slots=True)
class StubReply:
    """What to answer; every field is optional (see the module docstring for defaults)."""

    content: str | None = None  #: assistant text; default "stub: " + first 40 chars of req.text
    finish_reason: str = "stop"  #: "stop", "length", "content_filter", ...
    delay: float = 0.0  #: seconds to wait before answering (or hanging / dropping)
    status: int = 200  #: HTTP status; >= 400 sends an API-style error body
    headers: dict[str, str] = field(default_factory=dict)  #: extra response headers
    raw_body: bytes | str | None = None  #: sent verbatim instead of the rendered JSON
    hang: bool = False  #: never answer; hold the connection until the client closes it
    drop: bool = False  #: close the connection without answering
    usage: tuple[int, int] | None = None  #: (prompt, completion); default: word counts
    #: per generated token: (token, logprob, {alternative: logprob}); the chosen token is
    #: added to ``top_logprobs`` when absent, as OpenAI does. Content defaults to the
    #: concatenated tokens when ``content`` is None.
    logprobs: list[tuple[Any, ...]] | None = None
    moderation: dict[str, float] | list[dict[str, float]] | None = None  #: category scores
    #: (one dict for all inputs, or one per input); categories are True at score >= 0.5
    reasoning_tokens: int = 0  #: hidden reasoning tokens reported in the usage (chat API)


#: ``fn(req)`` returning a reply, a content string, or None (fall through to the default).
Handler = Callable[[StubRequest], "StubReply | str | None"]


def stub_embedding(text: str, dims: int = STUB_EMBEDDING_DIM) -> list[float]:
    """A deterministic, unnormalised pseudo-embedding of ``text`` (SHA-256 stream)."""
    import hashlib

    out: list[float] = []
    block = 0
    while len(out) < dims:
        digest = hashlib.sha256(f"{block}:{text}".encode()).digest()
        out += [(b - 127.5) / 127.5 for b in digest]
        block += 1
    return out[:dims]


def _content_text(content: Any) -> str:
    """Text of an OpenAI/Anthropic message content: a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    if isinstance(content, dict):
        return str(content.get("text", ""))
    return "" if content is None else str(content)


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(body: dict[str, Any]) -> int:
    total = _words(_content_text(body.get("system")))
    for msg in body.get("messages") or []:
        if isinstance(msg, dict):
            total += _words(_content_text(msg.get("content")))
    return total


def _as_reply(value: Any, req: StubRequest) -> StubReply | None:
    """Resolve a scripted value: a reply, a string (content), or a handler function."""
    if callable(value) and not isinstance(value, StubReply):
        value = value(req)
    if isinstance(value, str):
        return StubReply(content=value)
    return value


def _render_logprobs(items: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        token, logprob = item[0], float(item[1])
        alts = dict(item[2]) if len(item) > 2 and item[2] else {}
        alts.setdefault(token, logprob)
        top = sorted(alts.items(), key=lambda kv: -kv[1])
        out.append(
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": float(lp), "bytes": list(t.encode())} for t, lp in top
                ],
            }
        )
    return out


class StubServer:
    """Scriptable OpenAI/Anthropic-compatible HTTP/1.1 server on 127.0.0.1 (ephemeral port).

    Use ``with StubServer() as stub`` (own loop in a daemon thread) or
    ``async with StubServer() as stub`` (the caller's loop).
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        reject_json_schema: bool = False,
        reasoning_endpoint: bool = False,
        models: Iterable[str] = ("stub-model",),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.handler: Handler | None = handler
        #: answer HTTP 500 to chat requests with response_format.type == "json_schema",
        #: like llama.cpp's server (json_object and a ``grammar`` field are accepted).
        self.reject_json_schema = reject_json_schema
        #: answer chat requests the way OpenAI's reasoning models do: HTTP 400 for
        #: ``max_tokens`` (use ``max_completion_tokens``), for any ``temperature`` other
        #: than 1 and for ``logprobs``; accepted answers report reasoning tokens.
        self.reasoning_endpoint = reasoning_endpoint
        self.models = list(models)
        self.host = host
        self.port = port
        #: exceptions raised by handlers (each answered with HTTP 500); tests may assert empty.
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._requests: list[StubRequest] = []
        self._seen: dict[bytes, int] = {}
        self._script: deque[Any] = deque()
        self._rules: list[tuple[str, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._n_conns = 0
        self._closing = False

    # ----------------------------------------------------------------- scripting
    def script(self, replies: Iterable[StubReply | str | Handler]) -> None:
        """Queue replies served one per POST request, in order, before any other rule."""
        with self._lock:
            self._script.extend(replies)

    def on_text(self, substring: str, reply: StubReply | str | Handler) -> None:
        """Answer requests whose text (last user message / moderation input) contains
        ``substring`` with ``reply`` (a reply, a content string, or ``fn(req)``)."""
        with self._lock:
            self._rules.append((substring, reply))

    def reset(self) -> None:
        """Forget recorded requests, identical-body counts, script, rules and errors."""
        with self._lock:
            self._requests.clear()
            self._seen.clear()
            self._script.clear()
            self._rules.clear()
            self.errors.clear()

    @property
    def requests(self) -> list[StubRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def count(self, pred: Callable[[StubRequest], bool] | None = None) -> int:
        """Number of requests received (matching ``pred`` when given)."""
        reqs = self.requests
        return len(reqs) if pred is None else sum(1 for r in reqs if pred(r))

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the base URL the ``anthropic`` SDK wants)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the base URL OpenAI-compatible clients want)."""
        return self.root_url + "/v1"

    # ----------------------------------------------------------------- lifecycle
    async def start_async(self) -> None:
        """Start serving on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, backlog=2048, limit=1 << 20
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        """Stop accepting, cancel open connections (including hanging ones)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def start(self) -> StubServer:
        """Start serving from a new event loop in a daemon thread; returns once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop_async())
                loop.close()

        self._thread = threading.Thread(target=run, name="stub-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop the background loop started by ``start`` and wait for its thread."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.start_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()

    # ----------------------------------------------------------------- protocol
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        self._n_conns += 1
        conn = self._n_conns - 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._closing:
                if not await self._one(reader, writer, conn):
                    break
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,
        ):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            self._conns.discard(task)

    async def _one(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int
    ) -> bool:
        """Read and answer one request; False means close the connection."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # client closed between requests
        lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this otherwise
        if headers.get("transfer-encoding", "").lower().endswith("chunked"):
            raw = await _read_chunked(reader)
        else:
            length = int(headers.get("content-length") or 0)
            raw = await reader.readexactly(length) if length else b""
        conn_hdr = headers.get("connection", "").lower()
        keep = conn_hdr != "close" if version == "HTTP/1.1" else conn_hdr == "keep-alive"

        body: Any = None
        bad_json = False
        if raw:
            try:
                body = _loads(raw)
            except ValueError:
                bad_json = True
        path = target.split("?", 1)[0]
        req = self._record(method, path, headers, body, raw, conn)

        route = path[3:] if path.startswith("/v1/") else path
        if method == "GET" and route == "/models":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in self.models
            ]
            return await self._send(writer, 200, _dumps({"object": "list", "data": data}), {}, keep, req)
        kind = _POST_ROUTES.get(route) if method == "POST" else None
        if kind is None:
            return await self._send_error(writer, kind, 404, f"no route {method} {path}", {}, keep, req)
        if bad_json or not isinstance(body, dict):
            return await self._send_error(writer, kind, 400, "body is not a JSON object", {}, keep, req)
        if (
            self.reject_json_schema
            and kind == "chat"
            and isinstance(body.get("response_format"), dict)
            and body["response_format"].get("type") == "json_schema"
        ):
            msg = "JSON schema conversion failed (stub mimics llama.cpp server)"
            return await self._send_error(writer, kind, 500, msg, {}, keep, req)

        refusal = self._reasoning_refusal(body) if self.reasoning_endpoint and kind == "chat" else None
        if refusal is not None:
            return await self._send_error(writer, kind, 400, refusal, {}, keep, req)

        try:
            reply = self._choose(req)
        except Exception as exc:  # noqa: BLE001 - a broken test handler becomes a visible 500
            return await self._handler_failed(writer, kind, exc, keep, req)

        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        if reply.drop:
            return False
        if reply.hang:
            while await reader.read(65536):
                pass
            return False
        if reply.raw_body is not None:
            payload = reply.raw_body.encode() if isinstance(reply.raw_body, str) else reply.raw_body
            return await self._send(writer, reply.status, payload, reply.headers, keep, req)
        if reply.status >= 400:
            msg = reply.content if reply.content is not None else f"stub error {reply.status}"
            return await self._send_error(writer, kind, reply.status, msg, reply.headers, keep, req)
        render = {
            "chat": self._render_chat,
            "messages": self._render_messages,
            "moderation": self._render_moderation,
            "embeddings": self._render_embeddings,
        }[kind]
        try:
            payload = _dumps(render(req, reply))
        except Exception as exc:  # noqa: BLE001 - e.g. an unknown moderation category
            return await self._handler_failed(writer, kind, exc, keep, req)
        return await self._send(writer, reply.status, payload, reply.headers, keep, req)

    async def _handler_failed(
        self, writer: asyncio.StreamWriter, kind: str, exc: Exception, keep: bool,
        req: StubRequest | None = None,
    ) -> bool:
        self.errors.append(exc)
        msg = "stub handler raised: " + "".join(traceback.format_exception_only(exc)).strip()
        return await self._send_error(writer, kind, 500, msg, {}, keep, req)

    def _record(
        self, method: str, path: str, headers: dict[str, str], body: Any, raw: bytes, conn: int
    ) -> StubRequest:
        key = path.encode() + b" " + (_dumps_sorted(body) if body is not None else raw)
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
            req = StubRequest(
                method, path, headers, body, raw, len(self._requests), n, time.monotonic(), conn
            )
            self._requests.append(req)
        return req

    def _choose(self, req: StubRequest) -> StubReply:
        with self._lock:
            scripted = self._script.popleft() if self._script else None
            rules = list(self._rules)
        if scripted is not None:
            reply = _as_reply(scripted, req)
            return reply if reply is not None else StubReply()
        if rules:
            text = req.text
            for substring, value in rules:
                if substring in text:
                    reply = _as_reply(value, req)
                    return reply if reply is not None else StubReply()
        handler = self.handler
        if handler is not None:
            reply = _as_reply(handler, req)
            if reply is not None:
                return reply
        return StubReply()

    # ----------------------------------------------------------------- rendering
    @staticmethod
    def _content(req: StubRequest, reply: StubReply) -> str:
        if reply.content is not None:
            return reply.content
        if reply.logprobs:
            return "".join(str(item[0]) for item in reply.logprobs)
        return "stub: " + req.text[:40]

    def _usage(self, req: StubRequest, reply: StubReply, content: str) -> tuple[int, int]:
        if reply.usage is not None:
            return int(reply.usage[0]), int(reply.usage[1])
        return _prompt_words(req.body), _words(content)

    def _render_chat(self, req: StubRequest, reply: StubReply) -> dict[str, Any]:
        content = self._content(req, reply)
        prompt, completion = self._usage(req, reply, content)
        reasoning = int(reply.reasoning_tokens)  # billed as completion tokens, as OpenAI does
        logprobs = (
            {"content": _render_logprobs(reply.logprobs), "refusal": None}
            if reply.logprobs is not None
            else None
        )
        n = req.body.get("n") or 1
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": reply.finish_reason,
                "logprobs": logprobs,
            }
            for i in range(n if isinstance(n, int) and n > 0 else 1)
        ]
        return {
            "id": f"chatcmpl-stub-{req.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.body.get("model") or "stub-model",
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion + reasoning,
                "total_tokens": prompt + completion + reasoning,
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
            "system_fingerprint": None,
        }

    @staticmethod
    def _reasoning_refusal(body: dict[str, Any]) -> str | None:
        """The error a reasoning endpoint gives for parameters it does not support."""
        if "max_tokens" in body:
            return ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead.")
        if "temperature" in body and body["temperature"] != 1:
            return ("Unsupported value: 'temperature' does not support "
                    f"{body['temperature']} with this model. Only the default (1) value is supported.")
        if body.get("logprobs"):
            return "Unsupported parameter: 'logprobs' is not supported with this model."
        return None

    def _render_messages(self, req: StubRequest, reply: StubReply) -> dict[str, Any]:
        content = self._content(req, reply)
        prompt, completion = self._usage(req, reply, content)
        return {
            "id": f"msg_stub_{req.index}",
            "type": "message",
            "role": "assistant",
            "model": req.body.get("model") or "stub-model",
            "content": [{"type": "text", "text": content}],
            "stop_reason": _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason),
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": completion},
        }

    def _render_moderation(self, req: StubRequest, reply: StubReply) -> dict[str, Any]:
        inp = req.body.get("input")
        n_inputs = len(inp) if isinstance(inp, list) and inp else 1
        given = reply.moderation
        per_input = given if isinstance(given, list) else [given or {}] * n_inputs
        results = []
        for scores_given in per_input:
            unknown = set(scores_given) - set(MODERATION_CATEGORIES)
            if unknown:
                raise ValueError(f"unknown moderation categories: {sorted(unknown)}")
            scores = {c: float(scores_given.get(c, 0.0)) for c in MODERATION_CATEGORIES}
            categories = {c: s >= 0.5 for c, s in scores.items()}
            results.append(
                {
                    "flagged": any(categories.values()),
                    "categories": categories,
                    "category_scores": scores,
                    "category_applied_input_types": {c: ["text"] for c in MODERATION_CATEGORIES},
                }
            )
        return {
            "id": f"modr-stub-{req.index}",
            "model": req.body.get("model") or "omni-moderation-latest",
            "results": results,
        }

    def _render_embeddings(self, req: StubRequest, reply: StubReply) -> dict[str, Any]:
        """One vector per input (``stub_embedding``: a function of the text and the
        requested ``dimensions``), in input order, with token usage."""
        inp = req.body.get("input")
        texts = inp if isinstance(inp, list) else [inp]
        dims = int(req.body.get("dimensions") or STUB_EMBEDDING_DIM)
        data = [{"object": "embedding", "index": i, "embedding": stub_embedding(str(t), dims)}
                for i, t in enumerate(texts)]
        tokens = sum(_words(str(t)) for t in texts)
        return {"object": "list", "data": data, "model": req.body.get("model") or "stub-embed",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    # ----------------------------------------------------------------- writing
    async def _send_error(
        self,
        writer: asyncio.StreamWriter,
        kind: str | None,
        status: int,
        message: str,
        headers: dict[str, str],
        keep: bool,
        req: StubRequest | None = None,
    ) -> bool:
        if kind == "messages":
            etype = _ANTHROPIC_ERROR.get(status, "api_error")
            payload = {"type": "error", "error": {"type": etype, "message": message}}
        else:
            etype = "invalid_request_error" if status < 500 else "server_error"
            payload = {"error": {"message": message, "type": etype, "param": None, "code": status}}
        return await self._send(writer, status, _dumps(payload), headers, keep, req)

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str], keep: bool,
        req: StubRequest | None = None,
    ) -> bool:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Unknown"
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if not keep:
            extra += "connection: close\r\n"
        head = (
            f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
        if req is not None:
            req.sent, req.status = time.monotonic(), status
        return keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """Read a ``Transfer-Encoding: chunked`` body (trailers are read and ignored)."""
    parts = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)

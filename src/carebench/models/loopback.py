"""An OpenAI-compatible endpoint on 127.0.0.1 that answers through carebench.

Some libraries (MLflow's judge optimizers, through DSPy and LiteLLM) can only reach
a model by URL. Pointing them at this endpoint keeps every model call inside the
carebench run: the owner supplies ``chat`` (a request in, a Completion out, made
through the run's runner, so cached, budgeted and written to ``calls.jsonl``) and
``embed`` (texts in, vectors out). Nothing here talks to the network; the socket is
bound to the loopback interface only.

An exception raised by ``chat`` (a budget stop, a failed call) is answered with HTTP
400, so the client gives up instead of retrying, and is kept in ``failures``: the
owner re-raises it after the library returns, because libraries tend to swallow a
failed call and carry on, and a failed call must never pass for a model's answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from carebench.types import ChatRequest, Completion, Message, StructuredSpec

ChatFn = Callable[[ChatRequest], Completion]
EmbedFn = Callable[[list[str]], Sequence[Sequence[float]]]

_ROLES = ("system", "user", "assistant")


def _text(content: Any) -> str:
    """Message content as text (a string, or OpenAI's list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def chat_request(body: dict[str, Any], *, temperature: float, max_tokens: int | None) -> ChatRequest:
    """A carebench request from an OpenAI chat body.

    Decoding is the owner's (``temperature``, ``max_tokens``), not the client's: the
    run's settings decide it, and the cache key stays stable across library versions
    whose defaults differ. A ``json_schema`` response format becomes a JSON
    constraint; ``json_object`` becomes an unconstrained JSON request.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("no messages")
    msgs = []
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _ROLES:
            raise ValueError(f"unsupported message role {role!r}")
        msgs.append(Message(role, _text(m.get("content"))))
    structured = None
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        js = fmt.get("json_schema") or {}
        structured = StructuredSpec(kind="json", schema_json=json.dumps(js.get("schema") or {}, sort_keys=True),
                                    name=str(js.get("name") or "answer"))
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        structured = StructuredSpec(kind="json", schema_json=json.dumps({"type": "object"}), name="answer")
    return ChatRequest(messages=tuple(msgs), temperature=temperature, max_tokens=max_tokens,
                       structured=structured)


def chat_response(comp: Completion, model: str) -> dict[str, Any]:
    finish = {"truncated": "length", "content_filtered": "content_filter"}
    reason = next((finish[f] for f in comp.flags if f in finish), "stop")
    u = comp.usage
    return {
        "id": "chatcmpl-carebench", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": reason,
                     "message": {"role": "assistant", "content": comp.text}}],
        "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                  "total_tokens": u.total_tokens},
    }


class LoopbackEndpoint:
    """``POST /v1/chat/completions`` and ``POST /v1/embeddings`` on 127.0.0.1.

    Requests are answered one at a time (the run's ledger is not shared between
    threads); ``chat_calls`` and ``embed_calls`` count what was asked.
    """

    def __init__(self, chat: ChatFn, embed: EmbedFn | None = None, *, temperature: float = 0.0,
                 max_tokens: int | None = None):
        self._chat, self._embed = chat, embed
        self.temperature, self.max_tokens = temperature, max_tokens
        self.failures: list[BaseException] = []
        self.chat_calls = 0
        self.embed_calls = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "endpoint not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Self:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # no access log on stderr
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    return self._reply(400, {"error": {"message": "malformed JSON body"}})
                path = self.path.rstrip("/")
                if path.endswith("/chat/completions"):
                    return self._reply(*endpoint._answer_chat(body))
                if path.endswith("/embeddings"):
                    return self._reply(*endpoint._answer_embed(body))
                return self._reply(404, {"error": {"message": f"no endpoint {self.path}"}})

            def _reply(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="carebench-loopback",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _answer_chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.failures:  # the run already stopped: make no further call
                return 400, {"error": {"message": f"carebench stopped: {self.failures[0]}"}}
            try:
                req = chat_request(body, temperature=self.temperature, max_tokens=self.max_tokens)
            except ValueError as e:
                return 400, {"error": {"message": f"bad chat request: {e}"}}
            self.chat_calls += 1
            try:
                comp = self._chat(req)
            except Exception as e:  # noqa: BLE001 - handed back to the owner, see module doc
                self.failures.append(e)
                return 400, {"error": {"message": f"carebench stopped: {e}"}}
            return 200, chat_response(comp, str(body.get("model", "")))

    def _answer_embed(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self._embed is None:
            return 404, {"error": {"message": "no embedder on this endpoint"}}
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, {"error": {"message": "input must be a string or a list of strings"}}
        with self._lock:
            self.embed_calls += 1
            vecs = self._embed(texts)
        return 200, {
            "object": "list", "model": str(body.get("model", "")),
            "data": [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                     for i, v in enumerate(vecs)],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

"""A loopback fake of the OpenAI Batch API and Anthropic Message Batches endpoints
(aiohttp on 127.0.0.1), for submit/status/fetch through the real SDKs.

OpenAI: ``POST /v1/files`` (multipart upload), ``POST /v1/batches``, ``GET /v1/batches``,
``GET /v1/batches/{id}``, ``GET /v1/files/{id}/content``. Anthropic: ``POST
/v1/messages/batches``, ``GET /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
``GET /v1/messages/batches/{id}/results``; live ``POST /v1/chat/completions`` and
``/v1/messages`` are passed to the stub too (and logged). Each request of a batch is answered by a
:class:`StubServer` running ``handler`` (so a batch answer is what the stub would answer
live); a batch reports ``in_progress`` for ``polls`` retrieves, then finishes. Requests
whose text contains ``fail_text`` get an error result. ``log`` keeps (method, path),
``headers`` (method, path, headers).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Self

import httpx
from aiohttp import web

from stub_server import StubServer


class FakeBatchAPI:
    def __init__(self, handler, *, polls: int = 1, fail_text: str | None = None):
        self.handler, self.polls, self.fail_text = handler, polls, fail_text
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[str, str]] = []
        #: (method, path, request headers with lower-case names) of every request
        self.headers: list[tuple[str, str, dict[str, str]]] = []
        self._n = 0

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> Self:
        self._stub = StubServer().start()
        self._stub.handler = self.handler
        self._http = httpx.Client(timeout=30)
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application(client_max_size=1 << 30)
            app.router.add_route("*", "/{tail:.*}", self._route)
            self._runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._http.close()
        self._stub.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:04d}"

    # -- answering --------------------------------------------------------------------
    def _answer(self, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = json.dumps(body)
        if self.fail_text and self.fail_text in text:
            return 400, {"error": {"message": "fake refusal", "type": "invalid_request_error"}}
        r = self._http.post(self._stub.root_url + url, json=body)
        return r.status_code, r.json()

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.log.append((request.method, path))
        self.headers.append((request.method, path, {k.lower(): v for k, v in request.headers.items()}))
        parts = [p for p in path.split("/") if p][1:]  # without "v1"
        if parts in (["chat", "completions"], ["messages"]) and request.method == "POST":  # live calls
            status, body = await asyncio.to_thread(self._answer, path, await request.json())
            return web.json_response(body, status=status)
        if parts[:2] == ["messages", "batches"]:
            return await self._anthropic(request, parts[2:])
        if parts == ["files"] and request.method == "POST":
            form = await request.post()
            data = form["file"].file.read()
            fid = self._id("file-")
            self.files[fid] = data
            return web.json_response({"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                      "filename": form["file"].filename, "purpose": form["purpose"],
                                      "status": "processed"})
        if parts[:1] == ["files"] and parts[2:] == ["content"]:
            return web.Response(body=self.files[parts[1]], content_type="application/octet-stream")
        if parts == ["batches"] and request.method == "POST":
            body = await request.json()
            lines = [json.loads(x) for x in self.files[body["input_file_id"]].decode().splitlines() if x.strip()]
            bid = self._id("batch_")
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                                 "input_file_id": body["input_file_id"], "completion_window": "24h",
                                 "status": "validating", "output_file_id": None, "error_file_id": None,
                                 "created_at": int(time.time()), "metadata": body.get("metadata"),
                                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                                 "_lines": lines, "_polls": 0}
            return web.json_response(self._public(self.batches[bid]))
        if parts == ["batches"]:
            data = [self._public(b) for b in reversed(self.batches.values()) if b["object"] == "batch"]
            return web.json_response({"object": "list", "data": data, "has_more": False,
                                      "first_id": data[0]["id"] if data else None,
                                      "last_id": data[-1]["id"] if data else None})
        if parts[:1] == ["batches"] and len(parts) == 2:
            b = self.batches[parts[1]]
            await asyncio.to_thread(self._advance_openai, b)
            return web.json_response(self._public(b))
        return web.json_response({"error": {"message": f"no route {path}"}}, status=404)

    @staticmethod
    def _public(b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def _advance_openai(self, b: dict[str, Any]) -> None:
        b["_polls"] += 1
        if b["status"] == "completed":
            return
        if b["_polls"] <= self.polls:
            b["status"] = "in_progress"
            return
        out, err = [], []
        for i, line in enumerate(b["_lines"]):
            status, body = self._answer(line["url"], line["body"])
            row = {"id": f"batch_req_{i}", "custom_id": line["custom_id"],
                   "response": {"status_code": status, "request_id": f"req_{i}", "body": body}, "error": None}
            (out if status == 200 else err).append(json.dumps(row))
        for kind, rows in (("output", out), ("error", err)):
            if rows:
                fid = self._id("file-")
                self.files[fid] = ("\n".join(rows) + "\n").encode()
                b[f"{kind}_file_id"] = fid
        b["request_counts"] = {"total": len(b["_lines"]), "completed": len(out), "failed": len(err)}
        b["status"] = "completed"

    async def _anthropic(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if not rest and request.method == "POST":
            body = await request.json()
            bid = self._id("msgbatch_")
            self.batches[bid] = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                                 "request_counts": {"processing": len(body["requests"]), "succeeded": 0,
                                                    "errored": 0, "canceled": 0, "expired": 0},
                                 "ended_at": None, "created_at": now, "expires_at": now,
                                 "cancel_initiated_at": None, "archived_at": None, "results_url": None,
                                 "object": "message_batch", "_requests": body["requests"], "_polls": 0}
            return web.json_response(self._public(self.batches[bid]))
        if not rest:
            data = [self._public(b) for b in reversed(self.batches.values()) if b["object"] == "message_batch"]
            return web.json_response({"data": data, "has_more": False, "first_id": None, "last_id": None})
        b = self.batches[rest[0]]
        if rest[1:] == ["results"]:
            return web.Response(body=b["_results"].encode(), content_type="application/binary")
        await asyncio.to_thread(self._advance_anthropic, b, str(request.url.origin()))
        return web.json_response(self._public(b))

    def _advance_anthropic(self, b: dict[str, Any], origin: str) -> None:
        b["_polls"] += 1
        if b["processing_status"] == "ended" or b["_polls"] <= self.polls:
            return
        rows, counts = [], {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for r in b["_requests"]:
            status, body = self._answer("/v1/messages", r["params"])
            if status == 200:
                result = {"type": "succeeded", "message": body}
            else:
                result = {"type": "errored", "error": {"type": "error", "error": body.get("error")}}
            counts[result["type"]] += 1
            rows.append(json.dumps({"custom_id": r["custom_id"], "result": result}))
        b["_results"] = "\n".join(rows) + "\n"
        b.update(processing_status="ended", request_counts=counts, ended_at=b["created_at"],
                 results_url=f"{origin}/v1/messages/batches/{b['id']}/results")

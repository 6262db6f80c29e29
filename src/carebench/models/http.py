"""Shared HTTP plumbing for the API providers: one pooled client, error classification.

Every provider maps transport and HTTP failures the same way: 429/5xx/timeouts/
connection errors are transient (retried by the runner, honouring Retry-After),
auth failures end the run with one clear line, other 4xx are recorded outcomes.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from typing import Any

import aiohttp

from carebench.models.base import PermanentError, TransientError, Unreachable
from carebench.types import CarebenchError


class AuthError(CarebenchError):
    """The server rejected the credentials: no retry can fix it, so the run stops."""


class LoopLocalClient:
    """A pooled aiohttp session per event loop.

    aiohttp rather than httpx: httpcore's pool costs ~6 ms of CPU per call at
    concurrency 64 on this class of machine (measured), aiohttp ~0.15 ms. A session
    cannot outlive its loop, and every batch of ``Run.calls`` runs on a fresh loop.
    """

    def __init__(self, concurrency: int, timeout_s: float):
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._concurrency),
                timeout=aiohttp.ClientTimeout(total=self._timeout_s, connect=min(self._timeout_s, 15.0)),
                trust_env=False,  # never route sensitive text through a proxy the user didn't name
                auto_decompress=True,
            )
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(value)
        return max(0.0, dt.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _path_hint(status: int, url: str) -> str:
    """A 404 from a base URL without ``/v1``: OpenAI-compatible servers (llama.cpp, vLLM,
    Ollama, LM Studio) serve the API under ``/v1``, the usual cause of that 404."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if status != 404 or "/v1" in parts.path:
        return ""
    base = f"{parts.scheme}://{parts.netloc}"
    return (f" (the URL has no /v1: OpenAI-compatible servers serve the API under /v1; "
            f"try the base URL {base}/v1, e.g. openai:MODEL@{base}/v1)")


async def post_json(
    session: aiohttp.ClientSession, url: str, payload: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    """POST JSON and return the decoded body, raising the provider error taxonomy."""
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            status = resp.status
            content = await resp.read()
            retry_after = resp.headers.get("retry-after")
    except aiohttp.ClientConnectorError as e:
        raise Unreachable(f"cannot connect to {url}: {_reason(e)}") from None
    except TimeoutError:
        raise TransientError(f"request to {url} timed out") from None
    except aiohttp.ClientError as e:
        raise TransientError(f"connection to {url} failed: {_reason(e)}") from None
    text = content.decode("utf-8", errors="replace")
    if status == 429 or status == 408 or status >= 500:
        raise HTTPServerError(
            status, f"HTTP {status} from {url}: {_snippet(text)}", retry_after=parse_retry_after(retry_after)
        )
    if status in (401, 403):
        raise AuthError(
            f"HTTP {status} from {url}: the server rejected the API key "
            "(check OPENAI_API_KEY / CAREBENCH_API_KEY / ANTHROPIC_API_KEY)"
        )
    if status >= 400:
        raise HTTPClientError(status, f"HTTP {status} from {url}: {_snippet(text)}{_path_hint(status, url)}")
    try:
        data = json.loads(content)
    except ValueError:
        raise TransientError(f"malformed JSON in response from {url}") from None
    if not isinstance(data, dict):
        raise TransientError(f"unexpected response shape from {url}")
    return data


class HTTPServerError(TransientError):
    def __init__(self, status: int, message: str, retry_after: float | None = None):
        super().__init__(message, retry_after=retry_after)
        self.status = status


class HTTPClientError(PermanentError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _reason(e: Exception) -> str:
    return str(e) or type(e).__name__


def _snippet(text: str, n: int = 200) -> str:
    """The server's own error message when the body is an API error object, else the text."""
    try:
        err = json.loads(text).get("error")
        message = err.get("message") if isinstance(err, dict) else err
        if isinstance(message, str) and message.strip():
            text = message
    except (ValueError, AttributeError):
        pass
    text = " ".join(text.split())
    return text[:n] + ("…" if len(text) > n else "")

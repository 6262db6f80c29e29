"""Pydantic models of vLLM's batch protocol, written from ``vllm/entrypoints/openai/run_batch.py``
(``BatchRequestInput``, ``BatchResponseData``, ``BatchRequestOutput``) and
``vllm/entrypoints/openai/protocol.py`` (``ChatCompletionRequest``, ``ResponseFormat``,
``JsonSchemaResponseFormat``, ``ErrorResponse`` / ``ErrorInfo``), for the fields carebench
writes and reads.

vLLM's own models allow unknown fields and only log them as ignored; these forbid them, so
a field carebench sends that vLLM would ignore fails here instead of being silently lost.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core.core_schema import ValidationInfo

_INT64 = 2**63 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Message(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str


class JsonSchemaResponseFormat(_Strict):
    name: str
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaResponseFormat | None = None


class ChatCompletionRequest(_Strict):
    messages: list[Message]
    model: str | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: ResponseFormat | None = None
    seed: int | None = Field(default=None, ge=-_INT64 - 1, le=_INT64)
    stop: str | list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: Literal["low", "medium", "high"] | None = None


class EmbeddingRequest(_Strict):
    model: str | None = None
    input: list[int] | list[list[int]] | str | list[str]
    dimensions: int | None = None


class BatchRequestInput(_Strict):
    custom_id: str
    method: str
    url: str
    body: ChatCompletionRequest | EmbeddingRequest

    @field_validator("body", mode="plain")
    @classmethod
    def check_type_for_url(cls, value: Any, info: ValidationInfo):
        url = info.data["url"]
        if url == "/v1/chat/completions":
            return ChatCompletionRequest.model_validate(value)
        if url == "/v1/embeddings":
            return EmbeddingRequest.model_validate(value)
        raise ValueError(f"run_batch serves no {url}")


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    error: ErrorInfo


class BatchResponseData(BaseModel):
    status_code: int = 200
    request_id: str
    body: dict[str, Any] | None = None


class BatchRequestOutput(BaseModel):
    id: str
    custom_id: str
    response: BatchResponseData | None
    error: Any | None

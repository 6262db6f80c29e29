"""The Messages API request type for each API version carebench may record.

The installed ``anthropic`` SDK describes one version, its ``ANTHROPIC_API_VERSION``
(2026-10-21 in anthropic 2.16), whose requests have no sampling parameters. Version
2023-06-01 takes the same request plus ``temperature``, ``top_p`` and ``top_k``, as the
SDK releases that described it declared them (``MessageCreateParamsBase`` of the 0.x
releases: ``temperature: float``, ``top_k: int``, ``top_p: float``).
"""

from __future__ import annotations

from typing import Required

from anthropic._constants import ANTHROPIC_API_VERSION
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.messages.batch_create_params import Request
from typing_extensions import TypedDict


class MessageCreateParams20230601(MessageCreateParamsNonStreaming, total=False):
    temperature: float
    top_k: int
    top_p: float


class Request20230601(TypedDict, total=False):
    custom_id: Required[str]
    params: Required[MessageCreateParams20230601]


#: API version -> the type of one Message Batches request line
BATCH_REQUEST = {ANTHROPIC_API_VERSION: Request, "2023-06-01": Request20230601}

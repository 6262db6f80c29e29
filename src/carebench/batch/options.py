"""What ``--batch DIR`` and ``--batch-format`` ask for, and the per-file limits.

Kept apart from the exporter so the run context can hold it without importing the
batch machinery for runs that do not use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from carebench.types import CarebenchError

#: ``--batch-format`` values: the file shape written for OpenAI-compatible models
#: (Anthropic models are always written as Message Batches requests)
FORMATS = ("openai", "anthropic", "vllm")

#: one megabyte as the providers' limits are read here: decimal (10**6 bytes), the stricter
#: reading of "200 MB" and "256 MB" (a binary reading would allow 4.9% and 4.9% more)
MB = 1_000_000

#: the providers' documented limits per batch file: (requests, bytes)
DEFAULT_LIMITS: dict[str, tuple[int, int]] = {
    "openai": (50_000, 200 * MB),  # OpenAI Batch API: 50,000 requests, 200 MB per input file
    "vllm": (50_000, 200 * MB),  # vLLM has none; the OpenAI limits keep files handy
    "anthropic": (100_000, 256 * MB),  # Message Batches: 100,000 requests or 256 MB per batch
}

#: the arguments of the carebench command being run (set by the CLI; request rounds record it)
COMMAND_LINE: list[str] = []

#: the environment variables a command falls back to when it has no ``--batch`` flag
ENV_DIR, ENV_FORMAT, ENV_LIMITS = "CAREBENCH_BATCH_DIR", "CAREBENCH_BATCH_FORMAT", "CAREBENCH_BATCH_LIMITS"


@dataclass(frozen=True)
class BatchOptions:
    """Batch mode for one run: where request files go and how they are shaped and split."""

    dir: Path
    format: str | None = None  # None: each provider's own (openai, anthropic)
    limits: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_LIMITS))

    def __post_init__(self) -> None:
        if self.format is not None and self.format not in FORMATS:
            raise CarebenchError(f"--batch-format must be one of {', '.join(FORMATS)}, got {self.format!r}")


def parse_limits(text: str, base: dict[str, tuple[int, int]] | None = None) -> dict[str, tuple[int, int]]:
    """``requests=N,mb=M`` (every format) or ``openai.requests=N,anthropic.mb=M`` (one);
    ``mb`` in decimal megabytes (:data:`MB`)."""
    limits = dict(base or DEFAULT_LIMITS)
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        fmt, dot, what = key.strip().rpartition(".")
        targets = [fmt] if dot else list(limits)
        try:
            n = float(value)
        except ValueError:
            n = -1
        if not eq or what not in ("requests", "mb") or n <= 0 or any(t not in limits for t in targets):
            raise CarebenchError(f"{ENV_LIMITS}: cannot read {part!r} (use requests=N,mb=M or "
                                 "openai.requests=N,anthropic.mb=M)")
        for t in targets:
            req, size = limits[t]
            limits[t] = (int(n), size) if what == "requests" else (req, round(n * MB))
    return limits


def batch_options(dir: str | Path | None, format: str | None = None) -> BatchOptions | None:
    """The run's batch options from its flags, else from ``CAREBENCH_BATCH_DIR`` /
    ``CAREBENCH_BATCH_FORMAT`` (how ``carebench batch run`` hands batch mode to any
    command), with ``CAREBENCH_BATCH_LIMITS`` overriding the per-file limits."""
    dir = dir if dir is not None else os.environ.get(ENV_DIR) or None
    if dir is None:
        if format is not None:
            raise CarebenchError("--batch-format needs --batch DIR")
        return None
    format = format if format is not None else os.environ.get(ENV_FORMAT) or None
    limits = parse_limits(os.environ.get(ENV_LIMITS, ""))
    return BatchOptions(Path(dir), format, limits)

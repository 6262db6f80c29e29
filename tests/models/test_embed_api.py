"""The OpenAI-compatible /v1/embeddings embedder against the loopback stub: batched HTTP
requests, one cached call of the run per text, configurable dimensions."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.models.embed import load_embedder
from carebench.types import CarebenchError
from stub_server import StubReply, StubServer, stub_embedding


def _expected(texts, dims):
    v = np.array([stub_embedding(t, dims) for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_batched_cached_embeddings_with_dimensions(tmp_path):
    texts = [f"post number {i}" for i in range(10)]
    with StubServer() as stub:
        runner = Run(run_options(cache=tmp_path / "c.sqlite", progress=False))
        emb = load_embedder(f"openai-embed:emb@{stub.base_url}", run=runner, dimensions=16, batch_size=4)
        vecs = emb.encode(texts)
        bodies = [r.body for r in stub.requests]
        assert vecs.shape == (10, 16)
        np.testing.assert_allclose(vecs, _expected(texts, 16), rtol=1e-6, atol=1e-6)
        assert len(bodies) == 3 and sorted(len(b["input"]) for b in bodies) == [2, 4, 4]  # 10 texts, 4 a batch
        assert all(b["dimensions"] == 16 and b["model"] == "emb" for b in bodies)
        # cached per text: only the new text is sent again
        again = emb.encode([texts[3], "a new post", texts[0]])
        assert stub.count() == 4 and stub.requests[-1].body["input"] == ["a new post"]
        np.testing.assert_allclose(again[[0, 2]], vecs[[3, 0]], rtol=1e-6)
        # other dimensions are other requests (and other cache entries); default: no dimensions field
        plain = load_embedder(f"openai-embed:emb@{stub.base_url}", run=runner).encode(texts[:2])
        assert plain.shape == (2, 8) and "dimensions" not in stub.requests[-1].body
        stub.handler = lambda req: StubReply(status=400, content="no such model")
        with pytest.raises(CarebenchError, match="embedding failed"):
            load_embedder(f"openai-embed:other@{stub.base_url}", run=runner).encode(["x"])
    assert runner.ledger.provider_calls == 10 + 1 + 2 + 1

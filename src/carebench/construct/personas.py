"""Persona tables, their cached embeddings, and nearest-persona search.

A persona table is user-supplied (JSONL/CSV/Parquet; VEILED-SH §4.2 used
Nemotron-Personas-Singapore): ``id``, ``text`` and any attribute columns (age,
sex, education, marital_status, occupation...). Column names can be mapped.

The table is embedded once per (embedder, table content): the matrix is stored
in the cache directory under that hash, so a 100k-row table costs one
embedding pass ever. Search is one matrix product of L2-normalised rows
(cosine), top ``k`` by descending similarity, ties by table order.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from platformdirs import user_cache_dir

from carebench.construct.sources import Persona
from carebench.datasets.files import format_from_suffix, read_rows
from carebench.fileio import atomic_write_bytes
from carebench.types import CarebenchError

#: columns that become the attributes the rewriter and the demographic figures use
ATTRIBUTES = ("age", "sex", "education", "marital_status", "occupation")
_BLOCK = 256  # queries per matrix product (bounds memory at ~block x table floats)


def load_personas(spec: str | Path, id_field: str = "id", text_field: str = "text") -> list[Persona]:
    """Every row becomes a :class:`Persona`; columns other than id/text are attributes."""
    from carebench.construct.io import resolve

    path = resolve(spec)
    fmt = format_from_suffix(path)
    if fmt is None:
        raise CarebenchError(f"{path}: unsupported persona table type (use .jsonl, .csv or .parquet)")
    out: list[Persona] = []
    seen: set[str] = set()
    for loc, raw in read_rows(path, fmt):
        where = f"{path}:{loc.split()[-1]}"
        pid, text = raw.get(id_field), raw.get(text_field)
        if pid is None or str(pid) == "":
            raise CarebenchError(f"{where}: field {id_field!r}: missing")
        if not isinstance(text, str) or not text.strip():
            raise CarebenchError(f"{where}: field {text_field!r}: missing or empty text")
        if str(pid) in seen:
            raise CarebenchError(f"{where}: duplicate persona id {pid!r}")
        seen.add(str(pid))
        attrs = {k: v for k, v in raw.items() if k not in (id_field, text_field, "illustrative") and v is not None}
        nested = next((k for k, v in attrs.items() if not isinstance(v, str | int | float | bool)), None)
        if nested is not None:  # an attribute is one value the rewriter and the figures show as is
            raise CarebenchError(f"{where}: attribute {nested!r}: expected a single value (text or number), "
                                 f"got {type(attrs[nested]).__name__}")
        out.append(Persona(id=str(pid), text=text.strip(), attributes=attrs))
    if not out:
        raise CarebenchError(f"{path}: empty persona table")
    return out


def table_hash(personas: list[Persona], embedder_name: str) -> str:
    h = hashlib.sha256(embedder_name.encode("utf-8"))
    for p in personas:
        h.update(b"\x00")
        h.update(p.text.encode("utf-8"))
    return h.hexdigest()[:32]


def default_embedding_dir() -> Path:
    env = os.environ.get("CAREBENCH_CACHE")
    base = Path(env).parent if env else Path(user_cache_dir("carebench"))
    return base / "persona-embeddings"


def persona_matrix(personas: list[Persona], embedder: Any, cache_dir: Path | None = None) -> tuple[np.ndarray, bool]:
    """(n x d float32 matrix of L2-normalised persona embeddings, loaded from cache?)."""
    if not getattr(embedder, "cacheable", True):  # e.g. a dry run's placeholder vectors
        return normalise(np.asarray(embedder.encode([p.text for p in personas]), dtype=np.float32)), False
    cache_dir = Path(cache_dir) if cache_dir is not None else default_embedding_dir()
    path = cache_dir / f"{table_hash(personas, embedder.name)}.npy"
    if path.exists():
        mat = np.load(path)
        if mat.shape[0] == len(personas):
            return mat, True
    mat = normalise(np.asarray(embedder.encode([p.text for p in personas]), dtype=np.float32))
    buf = io.BytesIO()
    np.save(buf, mat)
    atomic_write_bytes(path, buf.getvalue())
    return mat, False


def normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def nearest(queries: np.ndarray, table: np.ndarray, k: int = 10, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Indices (q x k) and cosines of the ``k`` most similar table rows per query.

    Rows of both matrices must be L2-normalised. ``mask`` (q x n bool, optional)
    excludes table rows per query; excluded rows never appear (fewer than ``k``
    allowed rows leave index -1 and cosine -inf at the end).
    """
    q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    t = np.asarray(table, dtype=np.float32)
    k = min(k, t.shape[0])
    idx_out = np.empty((q.shape[0], k), dtype=np.int64)
    sim_out = np.empty((q.shape[0], k), dtype=np.float32)
    n = t.shape[0]
    for s in range(0, q.shape[0], _BLOCK):
        sims = q[s : s + _BLOCK] @ t.T
        if mask is not None:
            sims = np.where(mask[s : s + _BLOCK], sims, -np.inf)
        if k < n:
            part = np.argpartition(sims, n - k, axis=1)[:, n - k :]
        else:
            part = np.tile(np.arange(n), (sims.shape[0], 1))
        kth = np.take_along_axis(sims, part, axis=1).min(axis=1)
        # rows whose k-th value is tied with rows left out: take the tied rows in table order
        for r in np.flatnonzero(np.count_nonzero(sims >= kth[:, None], axis=1) > k):
            cand = np.flatnonzero(sims[r] >= kth[r])
            part[r] = cand[np.lexsort((cand, -sims[r, cand]))[:k]]
        vals = np.take_along_axis(sims, part, axis=1)
        order = np.lexsort((part, -vals), axis=-1)
        part = np.take_along_axis(part, order, axis=1)
        vals = np.take_along_axis(vals, order, axis=1)
        idx_out[s : s + _BLOCK] = np.where(np.isfinite(vals), part, -1)
        sim_out[s : s + _BLOCK] = vals
    return idx_out, sim_out


_RANGE = re.compile(r"^\s*(\d{1,3})\s*(?:-|to|–)\s*(\d{1,3})\s*$")


def age_range(value: Any, slack: int = 5) -> tuple[int, int] | None:
    """An inferred age as a closed range: ``"20-29"`` as is, ``34`` as 29-39; None if unknown."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) - slack, int(value) + slack
    s = str(value)
    m = _RANGE.match(s)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^\s*(\d{1,3})\s*$", s)
    if m:
        return int(m.group(1)) - slack, int(m.group(1)) + slack
    return None


def _known(v: Any) -> bool:
    return v is not None and str(v).strip().lower() not in ("", "unknown", "unclear", "n/a", "none", "any")


def attribute_mask(inferred: dict[str, Any], personas: list[Persona]) -> np.ndarray:
    """Which personas satisfy the inferred constraints (for ``--attributes filter``).

    Age is a range test; any other attribute filters only when the inferred value
    occurs (case-insensitively) among the table's values for it, so a free-text
    guess outside the table's vocabulary informs the picker but removes nobody.
    """
    ok = np.ones(len(personas), dtype=bool)
    for key, val in inferred.items():
        if not _known(val):
            continue
        if key == "age":
            rng = age_range(val)
            if rng is None:
                continue
            for i, p in enumerate(personas):
                a = p.attributes.get("age")
                if isinstance(a, int | float) and not rng[0] <= a <= rng[1]:
                    ok[i] = False
            continue
        want = str(val).strip().lower()
        vocab = {str(p.attributes.get(key, "")).strip().lower() for p in personas}
        if want not in vocab:
            continue
        for i, p in enumerate(personas):
            if key in p.attributes and str(p.attributes[key]).strip().lower() != want:
                ok[i] = False
    return ok


class HashingEmbedder:
    """Bag-of-words vectors (hashed word uni- and bigrams, L2-normalised): no model, no
    download, no torch. A lexical stand-in for the sentence encoder when routing must
    be cheap (tests, dry runs of large tables); similarity is word overlap, not meaning."""

    name = "hashing-bow-4096"

    def __init__(self, n_features: int = 4096):
        from sklearn.feature_extraction.text import HashingVectorizer

        self._vec = HashingVectorizer(n_features=n_features, alternate_sign=False, norm="l2", ngram_range=(1, 2))

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._vec.transform(list(texts)).toarray(), dtype=np.float32)


def get_embedder(spec: str | None, run: Any = None, calls: Any = None) -> Any:
    """``hashing`` (bag of words, no model) or any spec the core embedder accepts
    (``builtin`` = the packaged MiniLM, a local encoder directory, or
    ``openai-embed:MODEL[@URL]``, whose calls go through the command's ``run``, by
    ``calls`` where given)."""
    if spec == "hashing":
        return HashingEmbedder()
    from carebench.models.embed import load_embedder

    return load_embedder(spec, run=run, calls=calls)

"""Re-rendering a report re-draws only the figures whose inputs changed.

Why: drawing is the slowest part of re-rendering a large report (about 1.2 s of a
paper-scale support rescore, where every other step takes well under a second), yet
``carebench report DIR`` and ``support rescore`` usually redraw the very same charts.

How: each chart helper in :mod:`carebench.report.figures` is wrapped by
:func:`reusable`, which computes a key from the chart's name and arguments, the source
of the drawing code, the matplotlib and Pillow versions and matplotlib's settings. The
key is written into the PNG itself (one ``tEXt`` chunk, no timestamp), so a PNG
describes what it was drawn from and nothing beside it can go stale. Inside
:func:`reusing_figures` a chart whose key matches a PNG already in the run's
``figures/`` directory returns that PNG's bytes instead of drawing: the same bytes a
new drawing gives, since drawing is deterministic.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

#: keyword of the PNG ``tEXt`` chunk that holds a figure's key
KEY_CHUNK = "carebench-figure"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"

_reuse: ContextVar[Mapping[str, bytes] | None] = ContextVar("carebench_figure_reuse", default=None)
_drawing: ContextVar[str | None] = ContextVar("carebench_figure_drawing", default=None)

F = TypeVar("F", bound=Callable[..., bytes])

#: per chart helper: [charts drawn, seconds drawing, charts reused] in this process
_TALLY: dict[str, list[float]] = {}


def current_key() -> str | None:
    """The key of the chart being drawn now (``fig_to_png`` writes it into the PNG)."""
    return _drawing.get()


def reusable(fn: F) -> F:
    """Wrap a chart helper: key its drawing, and reuse a matching PNG inside :func:`reusing_figures`.

    A chart drawn inside another (``confusion_heatmap`` calls ``heatmap``) is simply
    drawn: the outer chart's key is the one the PNG carries. Arguments that cannot be
    keyed (an object of another type) are drawn without a key and never reused.
    """

    source = fn.__code__.co_filename  # the drawing code the key hashes (no import of it here)

    @functools.wraps(fn)
    def chart(*args: Any, **kwargs: Any) -> bytes:
        if _drawing.get() is not None:
            return fn(*args, **kwargs)
        try:
            key = figure_key(fn.__name__, args, kwargs, source)
        except TypeError:
            return fn(*args, **kwargs)
        tally = _TALLY.setdefault(fn.__name__, [0, 0.0, 0])
        found = (_reuse.get() or {}).get(key)
        if found is not None:
            tally[2] += 1
            return found
        token = _drawing.set(key)
        t0 = time.perf_counter()
        try:
            png = fn(*args, **kwargs)
        finally:
            _drawing.reset(token)
        # counted only when a chart came out (one with nothing to show raised instead)
        tally[0] += 1
        tally[1] += time.perf_counter() - t0
        return png

    return chart  # type: ignore[return-value]


def drawing_done() -> dict[str, tuple[int, float, int]]:
    """Per chart helper, what this process did so far: (drawn, seconds drawing, reused).
    Take differences around a phase to see how much of it went into drawing."""
    return {name: (int(t[0]), t[1], int(t[2])) for name, t in _TALLY.items()}


@contextmanager
def reusing_figures(directory: str | Path) -> Iterator[None]:
    """Within the block, charts whose key matches a PNG in ``directory`` are not drawn again."""
    found: dict[str, bytes] = {}
    d = Path(directory)
    if d.is_dir():
        for path in sorted(d.glob("*.png")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            key = png_text(data, KEY_CHUNK)
            if key is not None and data.endswith(_PNG_END):  # a whole file, not a truncated one
                found[key] = data
    token = _reuse.set(found)
    try:
        yield
    finally:
        _reuse.reset(token)


def figure_key(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], source: str) -> str:
    """SHA-256 of everything a chart's pixels depend on; TypeError for an argument it cannot key.
    ``source`` is the file of the chart's drawing code (recorded by :func:`reusable`)."""
    h = hashlib.sha256(_environment(source))
    _feed(h, name)
    _feed(h, list(args))
    _feed(h, dict(sorted(kwargs.items())))
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _code_and_versions(source_file: str) -> bytes:
    import matplotlib
    import PIL

    source = Path(source_file).read_bytes() if Path(source_file).is_file() else b""
    return hashlib.sha256(b"\0".join([source, matplotlib.__version__.encode(), PIL.__version__.encode(),
                                      np.__version__.encode()])).digest()


def _environment(source_file: str) -> bytes:
    """The drawing code, library versions and matplotlib's current settings (a user's
    matplotlibrc changes what the styled charts leave unset)."""
    import matplotlib

    h = hashlib.sha256(_code_and_versions(source_file))
    for k in sorted(matplotlib.rcParams):
        if k.startswith("backend"):  # charts draw on their own Agg canvas; reading it would pick a backend
            continue
        h.update(f"{k}={matplotlib.rcParams[k]!r}\n".encode())
    return h.digest()


def _feed(h: Any, obj: Any) -> None:
    """Feed a canonical, type-tagged encoding of ``obj`` (exact for floats, NaN included)."""
    if obj is None or isinstance(obj, (bool, int, str)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, float):
        h.update(f"float:{obj.hex()};".encode())
    elif isinstance(obj, np.generic):
        _feed(h, obj.item())
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            h.update(f"objects{obj.shape}:".encode())
            _feed(h, obj.ravel().tolist())
        else:
            h.update(f"array{obj.dtype.str}{obj.shape}:".encode())
            h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, Mapping):
        h.update(f"map{len(obj)}:".encode())
        for k, v in obj.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}{len(obj)}:".encode())
        for v in obj:
            _feed(h, v)
    else:
        raise TypeError(f"cannot key a {type(obj).__name__}")


def png_text(png: bytes, keyword: str) -> str | None:
    """The text of a PNG's ``tEXt`` chunk ``keyword`` (read before the image data), or None."""
    if not png.startswith(_PNG_SIGNATURE):
        return None
    pos, want = 8, keyword.encode("latin-1") + b"\0"
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind = png[pos + 4:pos + 8]
        if kind in (b"IDAT", b"IEND"):
            return None
        body = png[pos + 8:pos + 8 + length]
        if kind == b"tEXt" and body.startswith(want):
            return body[len(want):].decode("latin-1")
        pos += 12 + length
    return None

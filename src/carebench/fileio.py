"""Atomic file writes: a crash or kill mid-write leaves the previous complete file
(or none), never a truncated one. Every run-directory file goes through here."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def _replacing(path: Path, mode: int | None, open_mode: str, **kw) -> Iterator[IO]:
    """A handle on a temp file in ``path``'s directory, renamed over ``path`` when the block
    ends without an error; an error removes the temp file and leaves ``path`` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, open_mode, **kw) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` in one step (temp file in the same dir + ``os.replace``).

    ``mode`` (e.g. ``0o600`` for private files) is set before the file appears.
    """
    with _replacing(path, mode, "wb") as fh:
        fh.write(data)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    atomic_write_bytes(Path(path), text.encode("utf-8"), mode)


def atomic_text_writer(path: Path, mode: int | None = None) -> contextlib.AbstractContextManager[IO[str]]:
    """Write ``path`` line by line without holding it in memory, and still atomically: the lines
    go to a temp file in the same directory, renamed over ``path`` only when the ``with`` block
    ends without an error (an error removes the temp file and leaves ``path`` as it was)."""
    return _replacing(path, mode, "w", encoding="utf-8", newline="")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: mkstemp creates 0600 files; results are meant to be shared like any other output
_FILE_MODE = 0o666 & ~_umask()

"""``carebench batch run --dir DIR -- COMMAND``: command, submit, wait, fetch and import,
command ... until the command finishes.

The command runs as its own ``carebench`` process each round. The loop keeps no state of its own: ``DIR/manifest.json`` says what was submitted and
fetched, and the cache holds every answer, so the same invocation killed at any point
resumes where it stopped (files not yet submitted are submitted, batches still running
are waited for, the command is re-run, and nothing is done twice).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from carebench.batch.manifest import MANIFEST, Manifest
from carebench.batch.options import ENV_DIR, ENV_FORMAT
from carebench.types import CarebenchError

#: give up after this many rounds in a row that imported no answer (every request errored)
MAX_FRUITLESS_ROUNDS = 3


@contextmanager
def _batch_env(dir: Path, batch_format: str | None):
    saved = {k: os.environ.get(k) for k in (ENV_DIR, ENV_FORMAT)}
    os.environ[ENV_DIR] = str(dir)
    if batch_format is not None:
        os.environ[ENV_FORMAT] = batch_format
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _outstanding(dir: Path) -> tuple[int, int]:
    """(files not yet submitted, batches submitted but not fetched)."""
    if not (dir / MANIFEST).exists():
        return 0, 0
    unsubmitted = running = 0
    for _, entry in Manifest.load(dir).files():
        sub = entry.get("submission") or {}
        if sub.get("fetched"):
            continue
        if entry["format"] == "vllm":
            raise CarebenchError(f"{entry['path']} is vLLM run_batch input: run it with vllm run-batch and "
                                 "import its output (docs/batch.md); batch run drives OpenAI and Anthropic")
        if sub.get("batch_id"):
            running += 1
        else:
            unsubmitted += 1
    return unsubmitted, running


def _say(text: str) -> None:
    print(f"batch: {text}", file=sys.stderr, flush=True)


def run_loop(dir: str | Path, args: list[str], *, poll_s: float = 30.0, max_poll_s: float = 600.0,
             batch_format: str | None = None, cache_path: str | Path | None = None) -> int:
    """Drive ``args`` (a carebench command line) through batch rounds; its exit code at the end."""
    from carebench.batch.submit import fetch, status, submit
    from carebench.engine.cache import CompletionCache

    if not args:
        raise CarebenchError("give the carebench command after --, e.g. carebench batch run --dir DIR -- "
                             "support run ...")
    if "--batch" in args or any(a.startswith("--batch=") for a in args):
        raise CarebenchError("leave --batch out of the command: batch run gives it --dir")
    dir = Path(dir)
    cache = CompletionCache(cache_path if cache_path is not None else _cache_flag(args))
    fruitless = 0
    while True:
        unsubmitted, running = _outstanding(dir)
        if unsubmitted:
            _say(submit(dir))
        if unsubmitted or running:
            wait = poll_s
            while True:
                st = status(dir)
                if st.finished:
                    break
                _say(f"{st.line()}; next check in {wait:.0f} s")
                time.sleep(wait)
                wait = min(max_poll_s, wait * 2)
            line = fetch(dir, cache)
            _say(line)
            fruitless = fruitless + 1 if line.split(": ", 1)[1].startswith("imported 0,") else 0
            if fruitless >= MAX_FRUITLESS_ROUNDS:
                raise CarebenchError(f"{fruitless} rounds in a row brought no answer (see {dir}/errors.jsonl)")
        with _batch_env(dir, batch_format):  # the command in its own process, as typed
            rc = subprocess.run([sys.executable, "-m", "carebench", *args], check=False).returncode
        if rc != 4:
            return rc


def _cache_flag(args: list[str]) -> str | None:
    """The command's own ``--cache FILE``, so results go where the command reads them."""
    for i, a in enumerate(args):
        if a == "--cache" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--cache="):
            return a.split("=", 1)[1]
    return None

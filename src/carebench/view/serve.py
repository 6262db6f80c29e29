"""``carebench view --serve``: the built page and the run reports it links to, on 127.0.0.1.

The page works from ``file://`` as it is; serving is for a browser on the same machine
that blocks local files, or a remote shell with a forwarded port. It uses the annotate
extra's server (uvicorn, starlette) and serves only the folder holding the page and the
runs, read-only, on loopback.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from carebench.listen_socket import listen_socket
from carebench.types import CarebenchError

HOST = "127.0.0.1"
MISSING_EXTRA = ("carebench view --serve needs the annotate extra's server: pip install 'carebench[annotate]' "
                 "(or open {index} in a browser: it needs no server)")


def serve_root(index: Path, runs: Sequence[Path]) -> Path:
    """The deepest folder holding the page and every run (what the server may read)."""
    return Path(os.path.commonpath([os.path.abspath(index.parent), *(os.path.abspath(r) for r in runs)]))


def serve(index: Path, runs: Sequence[Path], port: int = 8000) -> None:
    try:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import RedirectResponse
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError:
        raise CarebenchError(MISSING_EXTRA.format(index=index)) from None
    root = serve_root(index, runs)
    page = "/" + Path(os.path.relpath(os.path.abspath(index), root)).as_posix()

    async def home(request):  # starlette's Request
        return RedirectResponse(page)

    app = Starlette(routes=[Route("/", home), Mount("/", StaticFiles(directory=str(root)))])
    sock = listen_socket(HOST, port, backlog=128)
    print(f"carebench view: serving {root} on http://{HOST}:{sock.getsockname()[1]}{page}", flush=True)
    config = uvicorn.Config(app, access_log=False, log_level="warning", lifespan="off", server_header=False)
    uvicorn.Server(config).run(sockets=[sock])

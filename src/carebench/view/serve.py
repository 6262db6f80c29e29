"""``carebench view --serve``: the built page and the run reports it links to, on 127.0.0.1.

The page works from ``file://`` as it is; serving is for a browser on the same machine
that blocks local files, or a remote shell with a forwarded port. It uses the annotate
extra's server (uvicorn, starlette) and serves only the page and the run directories it
lists, read-only, on loopback: nothing else below the folder they share.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from carebench.listen_socket import listen_socket
from carebench.types import CarebenchError

HOST = "127.0.0.1"
MISSING_EXTRA = ("carebench view --serve needs the annotate extra's server: pip install 'carebench[annotate]' "
                 "(or open {index} in a browser: it needs no server)")


def serve_root(index: Path, runs: Sequence[Path]) -> Path:
    """The deepest folder holding the page and every run (the server's root: URLs are paths below it)."""
    return Path(os.path.commonpath([os.path.abspath(index.parent), *(os.path.abspath(r) for r in runs)]))


def serve_app(index: Path, runs: Sequence[Path]) -> tuple[Any, str]:
    """The app serving the page and the run directories, nothing else below their common folder
    (which may be far above them: a page in one folder and runs in another share ``/``), and
    the page's URL path."""
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.responses import RedirectResponse
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError:
        raise CarebenchError(MISSING_EXTRA.format(index=index)) from None
    root = serve_root(index, runs)
    page = Path(os.path.relpath(os.path.abspath(index), root)).as_posix()
    folders = sorted({Path(os.path.relpath(os.path.abspath(r), root)).as_posix() for r in runs})

    class PageAndRuns(StaticFiles):
        async def get_response(self, path: str, scope: Any) -> Any:
            p = path.replace(os.sep, "/")
            if p != page and not any(f == "." or p.startswith(f + "/") for f in folders):
                raise HTTPException(status_code=404)
            return await super().get_response(path, scope)

    async def home(request: Any) -> Any:  # starlette's Request
        return RedirectResponse("/" + page)

    return Starlette(routes=[Route("/", home), Mount("/", PageAndRuns(directory=str(root)))]), "/" + page


def serve(index: Path, runs: Sequence[Path], port: int = 8000) -> None:
    app, page = serve_app(index, runs)
    try:
        import uvicorn
    except ImportError:
        raise CarebenchError(MISSING_EXTRA.format(index=index)) from None

    sock = listen_socket(HOST, port, backlog=128)
    print(f"carebench view: serving {index} and the run directories it lists on http://{HOST}:"
          f"{sock.getsockname()[1]}{page}", flush=True)
    config = uvicorn.Config(app, access_log=False, log_level="warning", lifespan="off", server_header=False)
    uvicorn.Server(config).run(sockets=[sock])

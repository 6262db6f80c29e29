"""Running the annotation app under uvicorn on a socket we bind ourselves.

Binding first lets ``--port 0`` pick a free port and report it before serving
(tests and scripts read the first line), and turns "address in use" into one
clear error. Access logging is off: request paths carry sign-in tokens.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

from carebench.listen_socket import listen_socket


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(db: str, host: str = "127.0.0.1", port: int = 8000, settings_path: Path | None = None,
          taxonomy_path: Path | None = None, contexts_path: Path | None = None) -> None:
    import uvicorn

    from carebench.annotate.app import create_app
    from carebench.annotate.settings import load_settings
    from carebench.annotate.store import Store
    from carebench.taxonomy import load_contexts, load_taxonomy

    settings = load_settings(settings_path)
    taxonomy, contexts = load_taxonomy(taxonomy_path), load_contexts(contexts_path)
    store = Store(db, create=False)
    sock = listen_socket(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if not is_loopback(host):
        print(f"carebench annotate: warning: listening on {host}, not loopback: put a TLS proxy in "
              "front, links and labels travel unencrypted otherwise", file=sys.stderr, flush=True)
    print(f"carebench annotate: serving {db} on http://{shown}:{actual}/", flush=True)
    config = uvicorn.Config(create_app(store, settings, taxonomy, contexts), access_log=False, log_level="warning",
                            lifespan="off", server_header=False, timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        store.close()

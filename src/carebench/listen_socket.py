"""A listening socket bound before a local web server starts (annotate, view).

Binding first lets ``--port 0`` pick a free port that the command prints before serving
(tests and scripts read that line), and turns "address in use" into one clear error
instead of a server's traceback.
"""

from __future__ import annotations

import socket

from carebench.types import CarebenchError


def listen_socket(host: str, port: int, backlog: int = 512) -> socket.socket:
    """A bound, listening TCP socket on ``host:port`` (IPv6 when ``host`` has a colon)."""
    if not 0 <= port <= 65535:
        raise CarebenchError(f"port {port} is not between 0 and 65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise CarebenchError(f"cannot listen on {host}:{port} ({e.strerror})") from None
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock

"""The ``--port`` of every server command (``serve``, ``serve-openenv``, ``policy-server``) and the range and
busy-port check each makes before opening the catalog and printing its banner: a mistake is one line naming
``--port``, not "serving on …" followed by uvicorn's ``[Errno 98]`` (or a port taken modulo 65536)."""

from __future__ import annotations

import socket
from typing import Any

from ..errors import ShopSimError

PORT_HELP = "TCP port to listen on, 0-65535 (0: a free port, printed in the banner)"


def add_port_argument(parser: Any, default: int) -> None:
    """``--port`` (checked by :func:`check_port_free`: one line, not argparse's usage block); the help states
    ``default``."""
    parser.add_argument("--port", type=int, default=default, help=f"{PORT_HELP} (default: {default})")


def check_port_range(port: int) -> None:
    """``ShopSimError`` unless ``port`` is 0–65535 (the socket layer would take 99999 as 99999 mod 65536)."""
    if not 0 <= port <= 65535:
        raise ShopSimError(f"--port {port} is not a TCP port: use 0-65535 (0: a free port, printed when serving)")


def check_port_free(host: str, port: int) -> int:
    """Bind the address once and release it, returning the port bound (the one the kernel chose for 0, which
    the server then binds again, so the banner names the port it listens on); ``ShopSimError`` (one line
    naming ``--port``) when it is out of range or taken."""
    check_port_range(port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ShopSimError(f"cannot resolve --host {host}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind(address)
        except OSError as exc:
            raise ShopSimError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} "
                f"(another server running? choose another --port)"
            ) from exc
        bound: int = probe.getsockname()[1]
    return bound

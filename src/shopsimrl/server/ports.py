"""The busy-port check every server command makes before it prints its banner (``serve``, ``serve-openenv``,
``policy-server``): one line naming ``--port`` instead of "serving on …" followed by uvicorn's ``[Errno 98]``."""

from __future__ import annotations

import socket

from ..errors import ShopSimError


def check_port_free(host: str, port: int) -> None:
    """Bind the address once and release it; ``ShopSimError`` (one line naming ``--port``) when it is taken."""
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

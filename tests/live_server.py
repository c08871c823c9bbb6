"""Test helpers: a real uvicorn server on a loopback port, and a TCP proxy that can drop connections."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn


@contextlib.contextmanager
def serve(app, *, max_wait: float = 10.0, **config) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread on a free loopback port (bound here first: no port race);
    ``config``: extra ``uvicorn.Config`` options (``http=`` a protocol class, ...)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + max_wait
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


async def unavailable_service(scope, receive, send):
    """A server that answers every request 503 (a reachable --env-url whose resets all fail)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": f"{message['type']}.complete"})
            if message["type"] == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"down"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_command(command: list[str], *, port: int, health: str = "/healthz", max_wait: float = 120.0,
                  **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``python -m shopsimrl.cli *command`` (which listens on ``port``) until ``health`` answers 200; stop it
    (SIGTERM) at the end. ``popen``: extra ``subprocess.Popen`` options (``env=``, ``preexec_fn=``)."""
    process = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", *command], **popen)
    deadline = time.monotonic() + max_wait
    try:
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=2).status_code == 200:
                    break
            assert process.poll() is None and time.monotonic() < deadline, f"{command[0]} did not start"
            time.sleep(0.1)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=20)


class DroppingProxy:
    """Forwards loopback TCP to ``upstream``; ``drop(n)`` closes every open connection and refuses the next n.

    A refused connection is accepted and closed at once, so the client sees the server vanish mid-request:
    a real transport error, not a simulated one.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.dropped = 0
        self._to_drop = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, count: int) -> None:
        with self._lock:
            self._to_drop = count
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()
        time.sleep(0.05)  # let the client see its pooled connection close

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.drop(0)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._to_drop > 0:
                    self._to_drop -= 1
                    self.dropped += 1
                    client.close()
                    continue
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

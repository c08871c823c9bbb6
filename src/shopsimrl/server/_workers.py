"""``shopsimrl serve --workers W``: W worker processes behind one front process that routes by lease.

A lease lives in the memory of the worker that issued it, so requests cannot land on a random worker (as
with SO_REUSEPORT). Each worker is a full service (its own catalog, index and lease pool) on a Unix socket
and owns a disjoint slot range, ``[offset_k, offset_k + size_k)``, and a lease-id prefix (``%02x`` of k).
The front is a small ASGI app that forwards each request, byte for byte, over keep-alive connections:

* ``reset`` and ``POST /v1/sessions`` go to the worker with the most free slots (each worker reports its
  count in a response header); when every slot is taken they queue at the worker with the fewest waiting,
  so queueing is FIFO within a worker and close to FIFO overall;
* ``interact`` / ``terminate`` / ``release_one`` go to the worker owning ``env_idx``; ``/v1/sessions/{id}``
  to the worker named by the id's prefix; anything unroutable to worker 0, which answers the usual 4xx;
* ``release_all`` goes to every worker; ``/healthz`` adds up the workers' figures;
* everything else (UIs, replay API, OpenAPI) goes to worker 0.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import multiprocessing as mp
import os
import re
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from ..dialogue.llm_shopper import LLMShopperSettings
from ..errors import ServiceError, ShopSimError
from ._protocol import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, KEEP_ALIVE_S, client_eof, http_protocol
from ._reference import decode, json_int
from .app import FREE_SLOTS_HEADER
from .guard import Guard, run_cancelling_on_disconnect
from .http_errors import admit, encode, error_payload, status_of

HOP_HEADERS = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"upgrade"}
_SESSION_PATH = re.compile(r"^/v1/sessions/([0-9a-f]{2})")
START_TIMEOUT = 120.0
CONNECT_TIMEOUT = 10.0  # opening a worker's Unix socket
EXCHANGE_TIMEOUT = 120.0  # any exchange with a worker, except a reset that may queue for a slot (see route)
NO_BODY_STATUSES = frozenset({204, 304})


class _Conn:
    """One keep-alive HTTP/1.1 connection to a worker's Unix socket (content-length or chunked responses)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ended = False  # our side ended its input (the client's half-close, relayed): not reusable

    async def exchange(self, head: bytes, body: bytes, *, bodiless: bool = False, ended: asyncio.Event | None = None,
                       ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send one request, read its answer; ``bodiless`` (HEAD) answers carry headers only. ``ended`` (the
        client's end of input) is relayed to the worker as ours, so it answers as one process would."""
        self.writer.write(head + body)
        await self.writer.drain()
        relay = asyncio.ensure_future(self._relay(ended)) if ended is not None else None
        try:
            return await self._read_answer(bodiless)
        finally:
            if relay is not None:
                relay.cancel()

    async def _relay(self, ended: asyncio.Event) -> None:
        await ended.wait()
        self.ended = True
        if self.writer.can_write_eof():
            self.writer.write_eof()

    async def _read_answer(self, bodiless: bool) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        lines = (await self.reader.readuntil(b"\r\n\r\n"))[:-4].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: list[tuple[bytes, bytes]] = []
        length, chunked = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            headers.append((name, value))
        if bodiless or status in NO_BODY_STATUSES or 100 <= status < 200:
            return status, headers, b""  # a HEAD answer's content-length describes a body that is not sent
        if not chunked:
            return status, headers, await self.reader.readexactly(length)
        parts = []
        while (size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)) > 0:
            parts.append((await self.reader.readexactly(size + 2))[:-2])
        await self.reader.readuntil(b"\r\n")
        return status, headers, b"".join(parts)


class Worker:
    def __init__(self, index: int, socket_path: str, first_slot: int, size: int) -> None:
        self.index, self.socket_path, self.first_slot, self.size = index, socket_path, first_slot, size
        self.free = size  # last reported free slots (negative: that many resets queued)
        self.process: Any = None
        self._idle: list[_Conn] = []

    async def request(self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
                      *, timeout: float | None = EXCHANGE_TIMEOUT, ended: asyncio.Event | None = None,
                      ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One exchange on a pooled connection; a connection that fails, times out or is cancelled is closed,
        so neither side keeps a half-used socket."""
        lines = [f"{method} ".encode() + target + b" HTTP/1.1", b"host: worker"]
        lines += [name + b": " + value for name, value in headers if name not in HOP_HEADERS and name != b"host"]
        lines.append(b"content-length: %d" % len(body))
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        if self._idle:
            conn = self._idle.pop()
        else:
            conn = _Conn(*await asyncio.wait_for(asyncio.open_unix_connection(self.socket_path), CONNECT_TIMEOUT))
        try:
            status, out_headers, data = await asyncio.wait_for(
                conn.exchange(head, body, bodiless=method == "HEAD", ended=ended), timeout)
        except BaseException:
            conn.writer.close()
            raise
        keep = not conn.ended
        for name, value in out_headers:
            if name == FREE_SLOTS_HEADER:
                self.free = int(value)
            elif name == b"connection" and value.lower() == b"close":
                keep = False
        if keep:
            self._idle.append(conn)
        else:
            conn.writer.close()
        return status, out_headers, data


class Front:
    """The front process's ASGI app."""

    def __init__(self, workers: list[Worker], guard: Guard | None = None) -> None:
        self.workers = workers
        self.guard = guard or Guard()
        self.offsets = [w.first_slot for w in workers]
        self.total = sum(w.size for w in workers)
        self._turn = 0

    # ------------------------------------------------------------------ routing
    def _for_reset(self) -> Worker:
        self._turn += 1
        order = self.workers[self._turn % len(self.workers):] + self.workers[:self._turn % len(self.workers)]
        chosen = max(order, key=lambda w: w.free)  # most free slots (or fewest queued); ties rotate
        chosen.free -= 1  # until its next answer says otherwise, so a burst of resets spreads out
        return chosen

    def _for_slot(self, raw: Any) -> Worker:
        slot = json_int(raw)  # 5 and 5.0 alike, as the single process reads env_idx
        if slot is None or not 0 <= slot < self.total:
            return self.workers[0]  # it answers the proper 400/409
        return self.workers[bisect.bisect_right(self.offsets, slot) - 1]

    def _for_prefix(self, prefix: str) -> Worker:
        index = int(prefix, 16)
        return self.workers[index] if index < len(self.workers) else self.workers[0]

    async def route(self, method: str, path: str, body: bytes) -> list[Worker]:
        if path == "/api/shop_agent" and method == "POST":
            try:
                request = decode(body or b"null")
            except ValueError:
                return [self.workers[0]]
            if not isinstance(request, dict):
                return [self.workers[0]]
            action = request.get("action")
            if action == "reset":
                return [self._for_reset()]
            if action == "release_all":
                return self.workers
            return [self._for_slot(request.get("env_idx"))]
        if path == "/v1/sessions" and method == "POST":
            return [self._for_reset()]
        match = _SESSION_PATH.match(path)
        if match:
            return [self._for_prefix(match.group(1))]
        return [self.workers[0]]

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] == "websocket":  # no WebSocket route: refused as the single process refuses it (403)
            await receive()
            await send({"type": "websocket.close", "code": 1000})
            return
        if scope["type"] != "http":
            return
        admitted = await admit(self.guard, scope, receive, send)
        if admitted is None:
            return
        cors, body = admitted
        method, path = scope["method"], scope["path"]
        target = scope.get("raw_path") or path.encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = list(scope.get("headers", []))
        gone, ended = asyncio.Event(), client_eof(scope)
        if method == "POST" and (path == "/v1/sessions" or (path == "/api/shop_agent" and b"reset" in body)):
            # a reset may queue for a slot as long as the client waits: no timeout, but it ends with the client
            await run_cancelling_on_disconnect(
                self._answer(method, path, target, headers, body, send, cors, None, ended), receive, gone)
        else:
            await self._answer(method, path, target, headers, body, send, cors, EXCHANGE_TIMEOUT, ended)

    async def _answer(self, method: str, path: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
                      send: Any, cors: list[tuple[bytes, bytes]], timeout: float | None,
                      ended: asyncio.Event | None = None) -> None:
        try:
            if path == "/healthz" and method == "GET":
                status, out_headers, data = await self._health(headers)
            else:
                targets = await self.route(method, path, body)
                answers = await asyncio.gather(
                    *(w.request(method, target, headers, body, timeout=timeout, ended=ended) for w in targets))
                status, out_headers, data = answers[0]
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
            error = ServiceError(0, f"a worker process is not answering: {exc.__class__.__name__}", code="worker_unavailable")
            status, out_headers = status_of(error), [(b"content-type", b"application/json")]
            data = encode(error_payload(error))
        out = [(n, v) for n, v in out_headers if n not in HOP_HEADERS and n != FREE_SLOTS_HEADER]
        length = next((v for n, v in out_headers if n == b"content-length"), None) if method == "HEAD" else None
        out.append((b"content-length", length if length is not None else str(len(data)).encode()))
        out += cors
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else data})

    async def _health(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        answers = await asyncio.gather(*(w.request("GET", b"/healthz", headers, b"") for w in self.workers))
        reports = [decode(data) for _, _, data in answers]
        merged = dict(reports[0])
        for key in ("environment_slots", "free_slots", "live_sessions", "waiting_resets"):
            merged[key] = sum(report[key] for report in reports)
        merged["ready"] = all(report["ready"] for report in reports)
        merged["workers"] = len(self.workers)
        return 200, [(b"content-type", b"application/json")], encode(merged)


def _worker_main(data: str, socket_path: str, index: int, first_slot: int, size: int, idle_timeout: float | None,
                 wait_timeout: float | None, runs: str, log_level: str, limits: tuple[int, int],
                 shopper: LLMShopperSettings | None = None) -> None:
    import threading

    import uvicorn

    from ..dialogue.llm_shopper import ShopperEndpoint
    from ..env.shop_env import ShopWorld
    from .app import create_app

    parent = os.getppid()

    def orphan_watch() -> None:  # the front was killed outright (no clean stop): do not outlive it
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=orphan_watch, daemon=True).start()
    app = create_app(ShopWorld.from_data_dir(data), slots=size, idle_timeout=idle_timeout,
                     reset_wait_timeout=wait_timeout, runs_dir=runs, first_slot=first_slot,
                     lease_prefix=f"{index:02x}", advertise_free_slots=True,
                     guard=Guard(max_body_bytes=limits[0], trusted=True), max_response_chars=limits[1],
                     llm_shopper=ShopperEndpoint(shopper) if shopper is not None else None)
    uvicorn.run(app, uds=socket_path, log_level=log_level, access_log=False, proxy_headers=False,
                server_header=False, date_header=False, timeout_keep_alive=24 * 3600,
                http=http_protocol(EXCHANGE_TIMEOUT, EXCHANGE_TIMEOUT))  # the front's end of input reaches the app


def _wait_ready(workers: list[Worker]) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT
    for worker in workers:
        while True:
            if not worker.process.is_alive():
                raise ShopSimError(f"worker {worker.index} exited during start (exit code {worker.process.exitcode})")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(worker.socket_path)
                break
            if time.monotonic() > deadline:
                raise ShopSimError(f"worker {worker.index} did not start within {START_TIMEOUT:.0f} s")
            time.sleep(0.05)


def serve_workers(*, data: str, host: str, port: int, slots: int, workers: int, idle_timeout: float | None,
                  wait_timeout: float | None, runs: str, log_level: str, progress: Any = None,
                  guard: Guard | None = None, max_response_chars: int = 65_536,
                  header_timeout: float = DEFAULT_HEADER_TIMEOUT, shopper: LLMShopperSettings | None = None,
                  body_timeout: float = DEFAULT_BODY_TIMEOUT) -> None:
    # shopper: LLMShopperSettings for shopper "llm" (each worker opens its own client on the same cache)
    """Start ``workers`` worker processes and the front on ``host:port``; stop the workers when it stops."""
    import uvicorn

    if workers > 64:
        raise ShopSimError("--workers is at most 64")
    if slots < workers:
        raise ShopSimError(f"--slots ({slots}) must be at least --workers ({workers})")
    guard = guard or Guard()
    folder = tempfile.mkdtemp(prefix="shopsimrl-workers-")
    context = mp.get_context("spawn")
    pool: list[Worker] = []
    first = 0
    for index in range(workers):
        size = slots // workers + (1 if index < slots % workers else 0)
        worker = Worker(index, os.path.join(folder, f"worker-{index}.sock"), first, size)
        worker.process = context.Process(
            target=_worker_main, name=f"shopsimrl-worker-{index}", daemon=True,
            args=(data, worker.socket_path, index, first, size, idle_timeout, wait_timeout, runs, log_level,
                  (guard.max_body_bytes, max_response_chars), shopper))
        worker.process.start()
        pool.append(worker)
        first += size
    def stop(signum: int, frame: Any) -> None:  # uvicorn re-raises SIGTERM after its clean stop: end via finally
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        _wait_ready(pool)
        if progress:
            progress(f"{workers} workers ready ({', '.join(f'slots {w.first_slot}-{w.first_slot + w.size - 1}' for w in pool)})")
        uvicorn.run(Front(pool, guard), host=host, port=port, log_level=log_level, access_log=False,
                    proxy_headers=False, server_header=False, date_header=False, timeout_graceful_shutdown=10,
                    timeout_keep_alive=KEEP_ALIVE_S, http=http_protocol(header_timeout, body_timeout))
    finally:
        signal.signal(signal.SIGTERM, previous)
        for worker in pool:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in pool:
            worker.process.join(timeout=10)
            with contextlib.suppress(OSError):
                Path(worker.socket_path).unlink()
        with contextlib.suppress(OSError):
            Path(folder).rmdir()

"""uvicorn's HTTP protocol with header and body timeouts: a connection must send each request in time.

uvicorn closes idle keep-alive connections, but not one that sends half a request line and then nothing
(or one byte a minute), nor one whose body trickles in: such connections stay open forever, and enough of
them exhaust file descriptors. Here each connection, when it opens and whenever a new request starts
arriving after the previous answer, gets ``header_timeout`` seconds to complete the request's headers
(uvicorn then has a new request cycle) and ``body_timeout`` seconds, from the same start, to complete its
body; otherwise it is closed. Slow handlers (a reset queued for a slot) are not affected. A WebSocket upgrade
hands the socket to uvicorn's WebSocket protocol and disarms the timer: the socket then lives until its client
closes it, the server's idle timeout reclaims it (``server/edge.py``) or the server stops.

A client that half-closes after its request (``shutdown(SHUT_WR)``: "I have sent everything") is answered:
asyncio would close the whole socket at the end of input and drop the answer, so the end of input after a
complete request keeps the write side open, answers, then closes. The request sees it as the event
``scope["extensions"][CLIENT_EOF_EXTENSION]`` (a reset waiting in the queue leaves it then: ``leases.CLIENT_EOF``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0  # a 1 MiB body at 35 KB/s; a step's body is a few KB
# Idle keep-alive connections stay open this long: longer than the clients' own expiry (httpx closes an idle
# pooled connection after 5 s, aiohttp after 15 s), so a client never sends on a connection the server is
# closing at that moment (uvicorn's default of 5 s equals httpx's and lost requests sent after ~4.97 s idle).
KEEP_ALIVE_S = 75
CLIENT_EOF_EXTENSION = "shopsim.client_eof"  # in scope["extensions"]: an asyncio.Event, set at the end of input


def client_eof(scope: dict[str, Any]) -> asyncio.Event | None:
    """The request's end-of-input event (None under another server, which closes the socket instead)."""
    event = (scope.get("extensions") or {}).get(CLIENT_EOF_EXTENSION)
    return event if isinstance(event, asyncio.Event) else None


class HeaderTimeoutProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

    def connection_made(self, transport: Any) -> None:
        self._header_timer: asyncio.TimerHandle | None = None
        self._eof_cycle: Any = None
        self._eof = asyncio.Event()
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if self._header_timer is None and (cycle is None or cycle.response_complete):
            self._arm()  # the first bytes of a further request on a kept-alive connection
        super().data_received(data)
        if self.cycle is not None and self.cycle is not self._eof_cycle:  # a new request: its app has not run yet
            self._eof_cycle, self._eof = self.cycle, asyncio.Event()
            self.cycle.scope.setdefault("extensions", {})[CLIENT_EOF_EXTENSION] = self._eof

    def eof_received(self) -> bool | None:
        """The client ended its input: a complete request still in hand is answered, then the socket closes."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.more_body or self.transport.get_protocol() is not self:
            return None  # idle, answered or cut short: asyncio closes the socket (the app sees a disconnect)
        cycle.keep_alive = False
        self._eof.set()
        return True

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._disarm()  # the socket now belongs to the WebSocket protocol (h11 passes the event, httptools none)
        super().handle_websocket_upgrade(*args)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        waiting_since = self.cycle
        self._header_timer = asyncio.get_running_loop().call_later(self.header_timeout, self._expire, waiting_since)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self, waiting_since: Any) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:  # closed, or handed on
            return
        cycle = self.cycle
        if cycle is waiting_since:  # no new request has begun
            self.transport.close()
        elif cycle is not None and cycle.more_body:  # headers in time: the rest of the body gets the rest
            left = max(self.body_timeout - self.header_timeout, 0.0)
            self._header_timer = asyncio.get_running_loop().call_later(left, self._expire_body, cycle)

    def _expire_body(self, cycle: Any) -> None:
        self._header_timer = None
        if self.cycle is cycle and cycle.more_body and not self.transport.is_closing():
            self.transport.close()


def http_protocol(header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                  body_timeout: float = DEFAULT_BODY_TIMEOUT) -> type[asyncio.Protocol]:
    """The protocol class to pass as uvicorn's ``http=`` with these timeouts (``body_timeout`` counts from the
    start of the request, like ``header_timeout``; it is at least ``header_timeout``)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout": header_timeout, "body_timeout": max(body_timeout, header_timeout)})

"""uvicorn's HTTP protocol with a header timeout: a connection must finish each request's headers in time.

uvicorn closes idle keep-alive connections, but not one that sends half a request line and then nothing
(or one byte a minute): such connections stay open forever, and enough of them exhaust file descriptors.
Here each connection, when it opens and whenever a new request starts arriving after the previous answer,
gets ``header_timeout`` seconds to complete the request's headers (uvicorn then has a new request cycle);
otherwise it is closed. Slow bodies and slow handlers are not affected.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

DEFAULT_HEADER_TIMEOUT = 10.0
# Idle keep-alive connections stay open this long: longer than the clients' own expiry (httpx closes an idle
# pooled connection after 5 s, aiohttp after 15 s), so a client never sends on a connection the server is
# closing at that moment (uvicorn's default of 5 s equals httpx's and lost requests sent after ~4.97 s idle).
KEEP_ALIVE_S = 75


class HeaderTimeoutProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    header_timeout: float = DEFAULT_HEADER_TIMEOUT

    def connection_made(self, transport: Any) -> None:
        self._header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if self._header_timer is None and (cycle is None or cycle.response_complete):
            self._arm()  # the first bytes of a further request on a kept-alive connection
        super().data_received(data)

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
        if self.cycle is waiting_since and not self.transport.is_closing():  # no new request has begun
            self.transport.close()


def http_protocol(header_timeout: float = DEFAULT_HEADER_TIMEOUT) -> type[asyncio.Protocol]:
    """The protocol class to pass as uvicorn's ``http=`` with this header timeout."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": header_timeout})

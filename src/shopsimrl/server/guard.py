"""Request admission for every HTTP API: body size, Content-Type, Host, Origin (CORS) and bearer-token checks.

Why at the ASGI edge, before routing: the reference endpoint is answered before FastAPI sees it (app.py), the
``--workers`` front forwards raw bytes, and a request refused here costs nothing else. The checks stop three
attacks on a service that usually runs on a developer's machine: a web page posting ``text/plain`` forms to it
(no CORS preflight for those), DNS rebinding (a page whose own host name resolves to 127.0.0.1 reads the replay
data), and one client sending a body large enough to exhaust memory or time.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..env.requests import MAX_RESPONSE_CHARS
from ..errors import AdmissionError, RequestError

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: a step is a few hundred bytes, a full model response a few KiB
DEFAULT_MAX_RESPONSE_CHARS = MAX_RESPONSE_CHARS  # the ``response``/``action`` text of one step (the env's cap)
API_KEY_ENV = "SHOPSIM_API_KEY"  # where the Python clients look for the key when none is passed
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
OPEN_PATHS = frozenset({"/healthz"})  # liveness probes work without the key (they reveal only counts)
_UI_PREFIXES = ("/debug-ui", "/replay-ui", "/ui/", "/docs", "/openapi.json", "/favicon.ico")


@dataclass(frozen=True)
class Preflight:
    """The answer to an allowed CORS preflight (``OPTIONS`` from a listed origin): 204 with the CORS headers and
    no body. A response, not a refusal: ``Guard.admit`` returns it and the caller sends it."""

    headers: tuple[tuple[bytes, bytes], ...]
    status: ClassVar[int] = 204

    async def send(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(b"content-length", b"0"), *self.headers]})
        await send({"type": "http.response.body", "body": b""})


MAX_JSON_DEPTH = 64  # arrays and objects inside each other; every body and message of every server is far shallower
#: A JSON string (escapes included, unrolled so the match stays linear) or a bracket: what nesting depth counts.
_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPENERS = frozenset(b"[{")


def check_nesting(body: bytes | str) -> None:
    """Raise ``AdmissionError`` (``nested_too_deep``) when the JSON ``body`` nests arrays and objects deeper than ``MAX_JSON_DEPTH``.

    A scan of the bytes, never a parse, so it cannot overflow itself; a body with no more brackets than the
    limit (most requests) is passed after two counts. Text that is not JSON is left to its route's answer."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return
    depth = 0
    for match in _STRUCTURE.finditer(raw):
        first = raw[match.start()]
        if first in _OPENERS:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise AdmissionError(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels of arrays and "
                                    f"objects; no request of this server needs more", code="nested_too_deep")
        elif first != 0x22:  # a closing bracket (a string token starts with '"')
            depth -= 1


#: A ``\uD800``-``\uDFFF`` escape: only a body with one can decode to a lone surrogate (UTF-8 bytes cannot).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: A surrogate encoded as UTF-8 bytes (never valid UTF-8; ``\xed`` is always a lead byte, so the match is exact).
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def check_text(body: bytes | str) -> None:
    """Raise ``AdmissionError`` (``invalid_text``) when the JSON ``body`` decodes to a string (key or value) that is not valid Unicode.

    A linear scan finds the escapes that could make one; only such a body is decoded and walked (iteratively,
    so that nesting cannot overflow the stack). A body that is not JSON is left to its route's own answer.
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    encoded = _ENCODED_SURROGATE.search(raw)
    if encoded is not None:  # json.loads(bytes) decodes with surrogatepass: these would reach the handler
        raise AdmissionError(f"the request holds text that is not valid Unicode: a lone surrogate encoded as bytes "
                          f"({encoded.group()!r}) at byte {encoded.start()}; send UTF-8 text", code="invalid_text")
    if _SURROGATE_ESCAPE.search(raw) is None:
        return
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise AdmissionError(f"the request holds a string that is not valid Unicode text: a lone surrogate "
                                  f"({item[exc.start]!a}) at character {exc.start}; send UTF-8 text", code="invalid_text") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address) only ever reaches this machine."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def host_name(value: str) -> str:
    """The host part of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``), lower-cased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


@dataclass(frozen=True)
class Guard:
    """The admission rules of one server (``shopsimrl serve`` options in brackets).

    * bodies over ``max_body_bytes`` are 413 [``--max-body-bytes``];
    * a POST body must be sent as ``Content-Type: application/json`` (415 otherwise);
    * the ``Host`` header must be an IP address, ``localhost``, the bound host name or an ``allowed_hosts``
      entry (``*`` allows any) [``--allowed-host``]: a rebinding page's own domain name is refused (421);
    * a request with an ``Origin`` other than the server's own is refused (403) unless ``cors_origins``
      lists it (``*``: any) [``--cors-origin``]; listed origins get CORS headers and preflight answers;
    * with ``api_key`` set, every API request needs ``Authorization: Bearer <key>`` (401); ``/healthz`` and
      the static UI pages are open (the pages ask for the key) [``--api-key-env VAR``].

    ``trusted`` (a worker behind the ``--workers`` front, on a private Unix socket) skips everything but the
    size cap: the front has already admitted the request.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    cors_origins: frozenset[str] = field(default_factory=frozenset)
    api_key: str | None = None
    trusted: bool = False
    open_paths: frozenset[str] = OPEN_PATHS  # answered without the key (liveness probes)
    _hosts_seen: dict[bytes, bool] = field(default_factory=dict, compare=False, repr=False)  # Host -> allowed

    @classmethod
    def build(cls, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, allowed_hosts: Iterable[str] = (),
              cors_origins: Iterable[str] = (), api_key: str | None = None, bound_host: str | None = None,
              trusted: bool = False) -> Guard:
        hosts = {host_name(h) for h in allowed_hosts if h}
        if bound_host and bound_host not in ("0.0.0.0", "::", ""):
            hosts.add(host_name(bound_host) if ":" not in bound_host.strip("[]") else bound_host.strip("[]").lower())
        if max_body_bytes < 1:
            raise RequestError("the body size limit must be at least 1 byte", code="invalid_request")
        return cls(max_body_bytes=max_body_bytes, allowed_hosts=frozenset(hosts),
                   cors_origins=frozenset(o.rstrip("/").lower() for o in cors_origins if o),
                   api_key=api_key or None, trusted=trusted)

    # ------------------------------------------------------------------ checks
    def admit(self, scope: dict[str, Any]) -> list[tuple[bytes, bytes]] | Preflight:
        """Check a request's head: the CORS headers to add to its answer, the whole answer of an allowed CORS
        preflight, or ``AdmissionError`` raised."""
        headers = _headers(scope)
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise AdmissionError(self.too_large(), code="body_too_large")
        if self.trusted:
            return []
        raw_host = headers.get(b"host", b"")
        allowed = self._hosts_seen.get(raw_host)
        host = raw_host.decode("latin-1")
        if allowed is None:
            allowed = self._host_allowed(host)
            if len(self._hosts_seen) < 1024:  # a client can send any Host: the memo stays small
                self._hosts_seen[raw_host] = allowed
        if not allowed:
            raise AdmissionError(f"Host {host!r} is not served here; start the server with --allowed-host "
                               f"{host_name(host) or 'NAME'} to accept it", code="host_not_served")
        extra: list[tuple[bytes, bytes]] = []
        origin = headers.get(b"origin")
        if origin is not None:
            name = origin.decode("latin-1").rstrip("/").lower()
            if not self._same_origin(name, host, scope):
                if "*" not in self.cors_origins and name not in self.cors_origins:
                    raise AdmissionError(f"cross-origin request from {name} refused; allow it with --cors-origin {name}", code="cross_origin_refused")
                extra = [(b"access-control-allow-origin", name.encode("latin-1")), (b"vary", b"origin")]
        elif (headers.get(b"sec-fetch-site") in (b"cross-site", b"same-site") and self._needs_key(scope["path"])
              and "*" not in self.cors_origins):
            # a browser request from another site without an Origin (an <img> or <script> GET): no API for it
            raise AdmissionError("cross-site browser request refused (Sec-Fetch-Site); call the API from "
                               "this server's own pages or allow an origin with --cors-origin", code="cross_origin_refused")
        method = scope["method"]
        if method == "OPTIONS" and extra:
            return Preflight((*extra, (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                              (b"access-control-allow-headers", b"content-type, authorization"),
                              (b"access-control-max-age", b"600")))
        if self.api_key is not None and self._needs_key(scope["path"]):
            sent = headers.get(b"authorization", b"")
            scheme, _, token = sent.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.api_key.encode()):
                raise AdmissionError("this server needs an API key: send the header Authorization: Bearer <key> "
                                   f"(the Python clients read it from ${API_KEY_ENV})",
                              [*extra, (b"www-authenticate", b"Bearer")], code="unauthorized")
        return extra

    def check_type(self, scope: dict[str, Any], body: bytes, cors: list[tuple[bytes, bytes]]) -> None:
        """A POST's body must be declared JSON (a form or ``text/plain`` post from a web page is refused); an
        empty body may come without a Content-Type (``/v1/.../terminate`` has an optional body)."""
        if self.trusted or scope["method"] != "POST":
            return
        kind = _headers(scope).get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind == b"application/json" or (not kind and not body):
            return
        shown = kind.decode("latin-1") or "no Content-Type"
        raise AdmissionError(f"POST bodies must be sent with Content-Type: application/json (got {shown}); "
                           f"with curl add -H 'Content-Type: application/json'", cors, code="unsupported_media_type")

    def too_large(self) -> str:
        return (f"request body larger than {self.max_body_bytes} bytes; "
                f"the server's limit is set with --max-body-bytes")

    def _host_allowed(self, host: str) -> bool:
        name = host_name(host)
        if not name:
            return False  # HTTP/1.1 requires Host; a request without one did not come from a browser or client
        if "*" in self.allowed_hosts or name in self.allowed_hosts:
            return True
        return name == "localhost" or _is_ip_literal(name)  # an address cannot be a rebinding page's own name

    @staticmethod
    def _same_origin(origin: str, host: str, scope: dict[str, Any]) -> bool:
        """The page was served by this host (the scheme may differ behind a TLS-terminating proxy)."""
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == host.lower()

    def _needs_key(self, path: str) -> bool:
        return path not in self.open_paths and not path.startswith(_UI_PREFIXES)


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    """The request headers by (lower-case) name, first value kept; computed once per request."""
    out = scope.get("shopsim.headers")
    if out is None:
        out = {}
        for name, value in scope.get("headers", []):
            out.setdefault(name.lower(), value)
        scope["shopsim.headers"] = out
    return out


async def read_limited(receive: Any, limit: int) -> bytes | None:
    """The whole request body, None when the client disconnected first; ``AdmissionError`` (``body_too_large``) past ``limit``."""
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise AdmissionError(f"request body larger than {limit} bytes; "
                               f"the server's limit is set with --max-body-bytes", code="body_too_large")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def replay_receive(body: bytes, then: Any) -> Any:
    """An ASGI ``receive`` that yields the already-read ``body`` once, then whatever the coroutine function
    ``then`` returns (the real connection's ``receive``, or a disconnect once someone watching it says so)."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await then()
        return message

    return receive


def with_headers(send: Any, extra: list[tuple[bytes, bytes]]) -> Any:
    """An ASGI ``send`` adding ``extra`` headers to the response start (the admitted request's CORS headers)."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def run_cancelling_on_disconnect(handler: Any, receive: Any, gone: Any, ended: Any = None) -> None:
    """Await ``handler`` (a coroutine); cancel it if the client disconnects first.

    A queued reset is the case this is for: without it a dead client's reset stays in the lease queue and the
    next free slot goes to it (uvicorn never cancels a request whose client left, it only reports it). ``ended``
    (the request's end-of-input event, server/_protocol.py) reaches the lease pool: a reset that must queue
    leaves the queue when it is set, with an answer a half-closed client still reads.
    """
    import asyncio

    from .leases import CLIENT_EOF

    token = CLIENT_EOF.set(ended)
    try:
        task = asyncio.ensure_future(handler)  # the task copies the context: the pool sees ``ended``
    finally:
        CLIENT_EOF.reset(token)

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        task.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        await task
    except asyncio.CancelledError:
        if not gone.is_set():
            raise
    finally:
        watcher.cancel()

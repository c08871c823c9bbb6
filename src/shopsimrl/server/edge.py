"""The edge every server command shares (``serve``, ``serve-openenv``, ``policy-server``): options, admission
and limits in one place (docs/service.md).

``serve`` applies ``Guard`` inside its own ASGI app (``app.py``: the reference endpoint is answered before
routing); the other servers are apps this module wraps in ``GuardedApp``, which applies the same ``Guard`` to
every HTTP request and WebSocket handshake, caps bodies, refuses text that is not Unicode, and checks each
WebSocket message before the wrapped app sees it: a message that is too large, binary, not a JSON object,
nested too deep or not Unicode is answered with an error in OpenEnv's shape and the session goes on. A socket
that sends nothing for ``idle_timeout`` seconds is closed with ``IDLE_CLOSE_CODE`` (1001, "going away") and its
session freed, like an idle lease; a socket that keeps sending lives as long as its client wants (the header
timeout ends with the upgrade, ``server/_protocol.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from ..errors import AdmissionError, ShopSimError
from ._protocol import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, KEEP_ALIVE_S, http_protocol
from .guard import (
    DEFAULT_MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    Guard,
    check_nesting,
    check_text,
    is_loopback,
    replay_receive,
    with_headers,
)
from .http_errors import admit

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024  # one WebSocket message (a step is a few hundred bytes)
IDLE_CLOSE_CODE = 1001  # "going away": the server reclaimed the idle session


def add_edge_arguments(parser: argparse.ArgumentParser, *, websocket: bool = False,
                       max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> argparse._ArgumentGroup:
    """The limits and security options of a server command (the same names on every server); returns the group
    so that a command can add its own limits to it."""
    limits = parser.add_argument_group("limits and security (docs/service.md)")
    limits.add_argument("--max-body-bytes", type=int, default=max_body_bytes,
                        help=f"largest request body (default {max_body_bytes >> 20} MiB; 413 beyond)")
    limits.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT,
                        help="seconds a connection may take to send its request headers (default 10)")
    limits.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT,
                        help="seconds a connection may take to send a whole request, body included (default 30)")
    if websocket:
        limits.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                            help="largest WebSocket message (default 256 KiB; answered with an error beyond)")
    limits.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="a Host name to accept besides IP addresses, localhost and --host (repeatable; * for any)")
    limits.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser origin (scheme://host:port) allowed to call the API (repeatable; * for any)")
    limits.add_argument("--api-key-env", metavar="VAR",
                        help="require Authorization: Bearer <key>, the key read from environment variable VAR")
    limits.add_argument("--insecure", action="store_true", help="allow a non-loopback --host without --api-key-env")
    return limits


def guard_from_args(args: argparse.Namespace, *, open_paths: frozenset[str] | None = None) -> Guard:
    """The admission rules from the command line; a non-loopback bind needs an API key or ``--insecure``."""
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise ShopSimError(f"--api-key-env {args.api_key_env}: that environment variable is unset or empty")
    if not is_loopback(args.host) and key is None and not args.insecure:
        raise ShopSimError(f"--host {args.host} is reachable from other machines: protect it with --api-key-env VAR "
                           f"(clients send the key as a bearer token), or pass --insecure to serve it without one")
    if args.max_body_bytes < 1024 or args.header_timeout <= 0 or args.body_timeout <= 0:
        raise ShopSimError("--max-body-bytes must be at least 1024, --header-timeout and --body-timeout positive")
    if getattr(args, "max_message_bytes", 1024) < 1024:
        raise ShopSimError("--max-message-bytes must be at least 1024")
    guard = Guard.build(max_body_bytes=args.max_body_bytes, allowed_hosts=args.allowed_host,
                        cors_origins=args.cors_origin, api_key=key, bound_host=args.host)
    if open_paths is not None:
        guard = Guard(max_body_bytes=guard.max_body_bytes, allowed_hosts=guard.allowed_hosts,
                      cors_origins=guard.cors_origins, api_key=guard.api_key, open_paths=open_paths)
    return guard


def uvicorn_options(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn settings that enforce the command's timeouts and message size."""
    options: dict[str, Any] = {"http": http_protocol(args.header_timeout, args.body_timeout),
                               "timeout_keep_alive": KEEP_ALIVE_S,
                               "proxy_headers": False, "server_header": False, "date_header": False}
    if hasattr(args, "max_message_bytes"):  # a larger frame is cut off by uvicorn before it is read whole
        options["ws_max_size"] = 4 * args.max_message_bytes
    return options


def _error_message(message: str, code: str = "VALIDATION_ERROR") -> str:
    """An error in OpenEnv's WebSocket shape (``WSErrorResponse``)."""
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


def message_problem(message: dict[str, Any], max_bytes: int) -> str | None:
    """Why a WebSocket message cannot be handed on (None: it can): its size, kind, JSON shape or text."""
    text = message.get("text")
    if text is None:
        return "binary WebSocket messages are not accepted: send JSON text"
    if len(text) > max_bytes:  # characters bound the bytes within 4x; the frame itself is capped by uvicorn
        return f"message of {len(text)} characters; this server accepts at most {max_bytes} (--max-message-bytes)"
    try:
        check_nesting(text)  # before the parse: json would recurse ~1000 deep, then fail the session
        value = json.loads(text)
    except AdmissionError:
        return f"message nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError as exc:
        return f"Invalid JSON: {exc}"
    if not isinstance(value, dict):
        return f"a message must be a JSON object, got {type(value).__name__}"
    try:
        check_text(text)
    except AdmissionError as exc:
        return str(exc)
    return None


class GuardedApp:
    """``app`` behind ``guard`` (HTTP and WebSocket), with WebSocket message checks and idle reclaim."""

    def __init__(self, app: Any, guard: Guard, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 idle_timeout: float | None = None) -> None:
        self.app = app
        self.guard = guard
        self.max_message_bytes = max_message_bytes
        self.idle_timeout = idle_timeout or None
        self.state = getattr(app, "state", None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        admitted = await admit(self.guard, scope, receive, send)
        if admitted is None:
            return
        cors, body = admitted
        replay = replay_receive(body, receive)
        if cors:
            send = with_headers(send, cors)
        await self.app(scope, replay, send)

    async def _websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            self.guard.admit({**scope, "method": "GET"})
        except AdmissionError:
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # before accept: an HTTP 403 to the client
            return
        idle = self.idle_timeout
        reclaimed = False

        async def app_send(message: dict[str, Any]) -> None:
            if not reclaimed:  # after an idle close the app's own close (code 1000) must not reach the socket
                await send(message)

        async def checked() -> dict[str, Any]:
            nonlocal reclaimed
            while True:
                try:
                    message: dict[str, Any] = await (asyncio.wait_for(receive(), idle) if idle else receive())
                except asyncio.TimeoutError:  # closed here with the documented code; the app frees the session
                    reclaimed = True
                    await send({"type": "websocket.close", "code": IDLE_CLOSE_CODE, "reason": "idle"})
                    return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE}
                if message["type"] != "websocket.receive":
                    return message
                problem = message_problem(message, self.max_message_bytes)
                if problem is None:
                    return message
                code = "INVALID_JSON" if problem.startswith("Invalid JSON") else "VALIDATION_ERROR"
                await send({"type": "websocket.send", "text": _error_message(problem, code)})

        await self.app(scope, checked, app_send)

"""FastAPI application: the reference ``POST /api/shop_agent`` contract (docs/contract.md#http-reference-api), ``GET /healthz``,
the resource-style ``/v1`` API, and the browser UIs with their read-only replay API.

A thin layer: it checks the request, maps a lease to its in-process ``ShopEnv`` (through ``EnvService``)
and turns library errors into JSON errors ``{"error": ..., "code": ...}`` through the one table of
``http_errors.py``. One ``ShopWorld`` (catalog + index) per
process is shared by all sessions. The reference API's actions are ``_reference``, the ``/v1`` routes ``_v1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..dialogue.llm_shopper import ShopperEndpoint
from ..env.shop_env import ShopEnv, ShopWorld
from ..errors import ShopSimError
from ..versions import ENVIRONMENT_VERSION, OBSERVATION_VERSION, PRIMARY_REWARD
from ._api_docs import install_offline_docs
from ._protocol import client_eof
from ._reference import REFERENCE_BODY, error_answer, reference_dispatch
from ._v1 import v1_router
from .guard import Guard, replay_receive, run_cancelling_on_disconnect, with_headers
from .http_errors import (
    INTERNAL_ERROR,
    VALIDATION_ERROR,
    admit,
    encode,
    error_payload,
    http_code,
    not_json,
    status_of,
)
from .leases import LeasePool
from .models import ErrorBody, Health
from .replay import RunsStore
from .service import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RESPONSE_CHARS, DEFAULT_SLOTS, EnvService
from .ui import ui_router

REAP_INTERVAL = 5.0
FREE_SLOTS_HEADER = b"x-shopsim-free-slots"  # free slots, or minus the queued resets when there are none
logger = logging.getLogger("shopsimrl.server")

def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": message, "code": code}, status_code=status)


def create_app(
    world: ShopWorld,
    *,
    slots: int = DEFAULT_SLOTS,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    reset_wait_timeout: float | None = None,
    runs_dir: str | Path = "runs",
    first_slot: int = 0,
    lease_prefix: str = "",
    advertise_free_slots: bool = False,
    guard: Guard | None = None,
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
    llm_shopper: ShopperEndpoint | None = None,
) -> FastAPI:
    """The service app. ``first_slot``, ``lease_prefix`` and ``advertise_free_slots`` are for a worker behind
    ``shopsimrl serve --workers`` (see ``_workers.py``); a single process keeps the defaults. ``guard`` holds
    the admission rules (body cap, Content-Type, Host, Origin, API key: guard.py); the default admits loopback
    and IP-address hosts, same-origin browsers and bodies up to 1 MiB, with no key."""
    service = EnvService(world, slots=slots, idle_timeout=idle_timeout, reset_wait_timeout=reset_wait_timeout,
                         first_slot=first_slot, lease_prefix=lease_prefix, max_response_chars=max_response_chars,
                         llm_shopper=llm_shopper)
    pool = service.pool
    app = ServiceApp(
        title="ShopSimRL environment service", version=ENVIRONMENT_VERSION, lifespan=_reaping(pool),
        description="Leased shopping-environment sessions: the reference `/api/shop_agent` API and `/v1/sessions`.",
        docs_url=None, redoc_url=None,  # /docs is served with local assets (_api_docs.py), never from a CDN
    )
    install_offline_docs(app)
    app.state.service = service
    app.state.pool = pool
    app.state.world = world
    app.state.runs = RunsStore(runs_dir)

    _install_error_handlers(app)
    dispatch = reference_dispatch(service)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> dict[str, Any]:
        return {
            "ready": True,
            "environment_slots": pool.size,
            "free_slots": pool.free_slots,
            "live_sessions": pool.live,
            "waiting_resets": pool.waiting,
            "tasks": len(world.catalog.goals),
            "environment_version": ENVIRONMENT_VERSION,
            "primary_reward": PRIMARY_REWARD,
            "observation_version": OBSERVATION_VERSION,
            "debug_ui": "/debug-ui",
            "replay_ui": "/replay-ui",
        }

    @app.post(
        "/api/shop_agent", tags=["reference"], openapi_extra={"requestBody": REFERENCE_BODY},
        responses={status: {"model": ErrorBody} for status in (400, 404, 409, 413, 503)},
        summary="The reference API (docs/contract.md#http-reference-api): reset, interact, terminate, release_one, release_all",
    )
    async def shop_agent(request: Request) -> Response:
        # Normally answered by ServiceApp.__call__ before routing; kept so the route is real without it too.
        status, payload = await dispatch(await request.body())
        return Response(encode(payload), status_code=status, media_type="application/json")

    app.include_router(v1_router(service))
    app.include_router(ui_router(app.state.runs))
    app.state.dispatch = dispatch
    app.state.advertise_free_slots = advertise_free_slots
    app.state.guard = guard or Guard()
    if app.state.guard.api_key is not None:
        _document_bearer_auth(app)
    return app


def _reaping(pool: LeasePool[ShopEnv]) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: while it runs, idle leases are reclaimed every ``REAP_INTERVAL`` seconds."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(REAP_INTERVAL)
                pool.reclaim_idle()

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()

    return lifespan


def _install_error_handlers(app: FastAPI) -> None:
    """Library errors, request validation errors and HTTP errors as ``{"error": ..., "code": ...}`` bodies."""

    @app.exception_handler(ShopSimError)
    async def library_error(_: Request, exc: ShopSimError) -> JSONResponse:
        status, payload = error_answer(exc)
        return JSONResponse(payload, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method in ("POST", "PUT", "PATCH") and not kind.endswith("json"):
            # curl -d sends application/x-www-form-urlencoded: say what to send, not "a valid dictionary"
            return _error(VALIDATION_ERROR.status, f"the request body must be JSON sent with the header Content-Type: application/json "
                               f"(got {kind or 'no Content-Type'}); with curl add -H 'Content-Type: application/json'",
                          VALIDATION_ERROR.code)
        undecodable = not_json(exc.errors())
        if undecodable is not None:  # the reference API's plain 400, not 422 "body.1: JSON decode error"
            return JSONResponse(error_payload(undecodable), status_code=status_of(undecodable))
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err.get('loc', ()))}: {err.get('msg', 'invalid')}" for err in exc.errors())
        return _error(VALIDATION_ERROR.status, f"invalid request: {problems}", VALIDATION_ERROR.code)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail), "code": http_code(exc.status_code)},
                            status_code=exc.status_code, headers=exc.headers)


def _document_bearer_auth(app: FastAPI) -> None:
    """Declare the bearer key in the OpenAPI schema, so Swagger UI's Authorize button sends it."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {}).setdefault("securitySchemes", {})["apiKey"] = {
                "type": "http", "scheme": "bearer", "description": "the key named by `serve --api-key-env`"}
            schema["security"] = [{"apiKey": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _headers_only(send: Any) -> Any:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if message.get("more_body"):
                return
            message = {"type": "http.response.body", "body": b""}
        await send(message)

    return sending


class ServiceApp(FastAPI):
    """The FastAPI app, with ``POST /api/shop_agent`` answered straight from ASGI before anything else.

    The reference endpoint carries nearly all the load (one request per agent step) and parses its own body,
    so routing, dependency resolution and the middleware stack bought nothing there but cost a large share
    of each request's time. Every other request (and the lifespan) goes through FastAPI unchanged.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        if self.state.advertise_free_slots:
            send = self._advertising(send)
        guard: Guard = self.state.guard
        admitted = await admit(guard, scope, receive, send)
        if admitted is None:
            return
        cors, raw = admitted
        if cors:
            send = with_headers(send, cors)
        if scope["method"] == "HEAD":  # a GET without its body: the routes are GET-only in FastAPI
            scope, send = {**scope, "method": "GET"}, _headers_only(send)
        gone = asyncio.Event()

        async def disconnected() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        inner = replay_receive(raw, disconnected)
        method, path = scope["method"], scope["path"]
        if path == "/api/shop_agent" and method == "POST":
            handler = self._reference(raw, send)
        else:
            handler = super().__call__(scope, inner, send)
        if method == "POST" and (path == "/v1/sessions" or (path == "/api/shop_agent" and b"reset" in raw)):
            await run_cancelling_on_disconnect(handler, receive, gone, client_eof(scope))  # a queued reset leaves
            # with its client (a hang-up, or the end of its input)
        else:
            await handler

    async def _reference(self, raw: bytes, send: Any) -> None:
        try:
            status, payload = await self.state.dispatch(raw)
            body = encode(payload)
        except Exception:  # a bug, never a client mistake: the same 500 FastAPI would give, and a log line
            logger.exception("unhandled error in /api/shop_agent")
            status, body = INTERNAL_ERROR.status, encode({"error": "internal server error", "code": INTERNAL_ERROR.code})
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def _advertising(self, send: Any) -> Any:
        """Adds ``x-shopsim-free-slots`` to every response, so a front process knows where a reset fits."""
        pool = self.state.pool

        async def advertise(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                free = pool.free_slots if not pool.waiting else -pool.waiting
                message = {**message, "headers": [*message.get("headers", []),
                                                  (FREE_SLOTS_HEADER, str(free).encode())]}
            await send(message)

        return advertise

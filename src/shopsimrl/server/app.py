"""FastAPI application: the reference ``POST /api/shop_agent`` contract (docs/contract.md#http-reference-api), ``GET /healthz``,
the resource-style ``/v1`` API, and the browser UIs with their read-only replay API.

A thin layer: it checks the request, maps a lease to its in-process ``ShopEnv`` (through ``EnvService``)
and turns library errors into JSON errors ``{"error": ..., "code": ...}`` through the one table of
``http_errors.py``. One ``ShopWorld`` (catalog + index) per
process is shared by all sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..contract import ACTION_LIMIT, INTERACTION_MODES, SHOPPER_NAMES, SINGLE_TURN, TERMINATION_REASONS
from ..dialogue.llm_shopper import ShopperEndpoint
from ..env.shop_env import ShopEnv, ShopWorld
from ..errors import InvalidRequestError, ShopSimError
from ..versions import ENVIRONMENT_VERSION, OBSERVATION_VERSION, PRIMARY_REWARD
from ._api_docs import install_offline_docs
from ._protocol import client_eof
from ._v1 import v1_router
from .guard import Guard, replay_receive, run_cancelling_on_disconnect, with_headers
from .http_errors import (
    INTERNAL_ERROR,
    NOT_JSON,
    VALIDATION_ERROR,
    admit,
    encode,
    error_payload,
    http_code,
    not_json,
    status_of,
)
from .leases import Lease
from .models import ErrorBody, Health
from .replay import RunsStore
from .service import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RESPONSE_CHARS, DEFAULT_SLOTS, EnvService
from .ui import ui_router

REAP_INTERVAL = 5.0
FREE_SLOTS_HEADER = b"x-shopsim-free-slots"  # free slots, or minus the queued resets when there are none
logger = logging.getLogger("shopsimrl.server")

# The reference request body, one schema per action, for the OpenAPI schema (the handler parses the body
# itself, so that a non-JSON body is a clear 400 in the reference's own error shape). Unknown fields are
# ignored, as by the reference service, so existing clients keep working.
# Integers are bounded to 64 bits: the JSON decoder (orjson) reads larger ones as floats.
_INT64 = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
_LEASE = {"env_idx": _INT64, "lease_id": {"type": "string", "minLength": 1}}


def _variant(action: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["action", *required],
            "properties": {"action": {"type": "string", "enum": [action]}, **properties}}


REFERENCE_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"oneOf": [
        _variant("reset", ["idx"], idx=_INT64, if_persona={"type": ["boolean", "null"]},
                 include_private_goal={"type": "boolean"},
                 interaction_mode={"type": "string", "enum": list(INTERACTION_MODES)},
                 shopper={"type": ["string", "null"], "enum": [*SHOPPER_NAMES, None]},
                 shopper_seed={"type": ["integer", "null"], "minimum": -(2**63), "maximum": 2**63 - 1},
                 wait_timeout={"type": "number", "minimum": 0, "maximum": 86_400}),
        _variant("interact", ["env_idx", "lease_id", "response"], **_LEASE, response={"type": "string"},
                 step_index={"type": "integer", "minimum": 1, "maximum": 2**63 - 1}),
        _variant("terminate", ["env_idx", "lease_id"], **_LEASE,
                 termination_reason={"type": "string", "enum": list(TERMINATION_REASONS)}),
        _variant("release_one", ["env_idx", "lease_id"], **_LEASE),
        _variant("dialogue_transcript", ["env_idx", "lease_id"], **_LEASE),
        _variant("release_all", []),
    ]}}},
}


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": message, "code": code}, status_code=status)


def error_answer(exc: ShopSimError) -> tuple[int, dict[str, str]]:
    """A library error's status and body, from the table in http_errors.py."""
    return status_of(exc), error_payload(exc)


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

    app = ServiceApp(
        title="ShopSimRL environment service", version=ENVIRONMENT_VERSION, lifespan=lifespan,
        description="Leased shopping-environment sessions: the reference `/api/shop_agent` API and `/v1/sessions`.",
        docs_url=None, redoc_url=None,  # /docs is served with local assets (_api_docs.py), never from a CDN
    )
    install_offline_docs(app)
    app.state.service = service
    app.state.pool = pool
    app.state.world = world
    app.state.runs = RunsStore(runs_dir)

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

    async def dispatch(raw: bytes) -> tuple[int, dict[str, Any]]:
        """One reference request: (HTTP status, ``{"result": ...}`` or ``{"error": ...}``)."""
        try:
            body = decode(raw or b"null")
        except ValueError:  # json.JSONDecodeError, orjson.JSONDecodeError and UnicodeDecodeError are ValueErrors
            return error_answer(InvalidRequestError(NOT_JSON))
        if not isinstance(body, dict):
            return error_answer(InvalidRequestError("request body must be a JSON object"))
        action = body.get("action")
        handler = handlers.get(action) if isinstance(action, str) else None
        if handler is None:
            return error_answer(InvalidRequestError(f"unsupported action: {action!r}"))
        try:
            return 200, {"result": await handler(body)}
        except ShopSimError as exc:  # every check on a request path raises a typed error (tests/test_errors.py)
            return error_answer(exc)

    def _lease(body: dict[str, Any], action: str) -> Lease[ShopEnv]:
        slot, lease_id = json_int(body.get("env_idx")), body.get("lease_id")
        if slot is None or not isinstance(lease_id, str) or not lease_id:
            raise InvalidRequestError(f"{action} requires a valid env_idx and lease_id")
        return service.lease(slot, lease_id)

    async def _reset(body: dict[str, Any]) -> dict[str, Any]:
        if "env_idx" in body:
            raise InvalidRequestError("reset must not include env_idx; the server assigns a slot")
        if "idx" not in body:
            raise InvalidRequestError("reset action requires idx parameter")
        idx = json_int(body["idx"])
        lease, payload = await service.reset(
            body["idx"] if idx is None else idx, persona=body.get("if_persona", False),
            interaction_mode=body.get("interaction_mode", SINGLE_TURN),
            include_private_goal=body.get("include_private_goal", False), wait_timeout=body.get("wait_timeout"),
            shopper=body.get("shopper"), shopper_seed=_seed(body.get("shopper_seed")),
        )
        payload.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return payload

    async def _interact(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "interact")
        result = await service.step_async(lease, body.get("response"), body.get("step_index"))
        result.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return result

    async def _terminate(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "terminate")
        result = await service.terminate_async(lease, body.get("termination_reason", ACTION_LIMIT))
        result.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return result

    async def _transcript(body: dict[str, Any]) -> dict[str, Any]:
        return service.dialogue_transcript(_lease(body, "dialogue_transcript"))

    async def _release_one(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "release_one")
        service.release(lease)
        return {"message": f"Environment {lease.slot} has been released"}

    async def _release_all(body: dict[str, Any]) -> dict[str, Any]:
        service.release_all()
        return {"message": "All environments have been initialized"}

    handlers = {
        "reset": _reset, "interact": _interact, "terminate": _terminate,
        "release_one": _release_one, "release_all": _release_all, "dialogue_transcript": _transcript,
    }

    app.include_router(v1_router(service))
    app.include_router(ui_router(app.state.runs))
    app.state.dispatch = dispatch
    app.state.advertise_free_slots = advertise_free_slots
    app.state.guard = guard or Guard()
    if app.state.guard.api_key is not None:
        _document_bearer_auth(app)
    return app


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


def _seed(value: Any) -> Any:
    """``shopper_seed`` as an int where JSON Schema counts it one (``7.0``); anything else is left for the
    service to refuse."""
    as_int = json_int(value)
    return value if as_int is None else as_int


def json_int(value: Any) -> int | None:
    """An integer as JSON Schema counts one (``7`` or ``7.0``, not ``true``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return None


def decode(raw: bytes) -> Any:
    return orjson.loads(raw)


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

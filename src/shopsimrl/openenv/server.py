"""The OpenEnv server: OpenEnv's own app factory over ``ShopSimEnvironment`` (``shopsimrl serve-openenv``).

Episodes go over OpenEnv's WebSocket session protocol (``/ws``): its HTTP ``/reset`` and ``/step`` build a fresh
environment per request, so only the WebSocket keeps an episode. ``slots`` is ``max_concurrent_envs``; one more
session is answered with OpenEnv's ``CAPACITY_REACHED`` error.

Every HTTP error answers ``{"detail": <message>, "code": <code>}`` (OpenEnv's ``detail`` plus the service's
stable code): a library error (an unknown split, a task index outside its split) with its status from
``server.http_errors``, a body that fails its model with 422 ``validation_error``, routing with 404/405.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app

from ..env.shop_env import ShopWorld
from ..errors import ShopSimError
from ..server.edge import DEFAULT_MAX_MESSAGE_BYTES, GuardedApp
from ..server.guard import Guard
from .environment import ShopSimEnvironment
from .models import ShopSimAction, ShopSimObservation, ShopSimState

ENV_NAME = "shopsim"


def create_openenv_app(world: ShopWorld | str | os.PathLike[str], *, slots: int = 8) -> Any:
    """The FastAPI app; every session shares ``world`` (opened once from a data directory if a path is given)."""
    shared = world if isinstance(world, ShopWorld) else ShopWorld.shared(world)

    def factory() -> ShopSimEnvironment:
        return ShopSimEnvironment(shared)

    factory.__name__ = "ShopSimEnvironment"
    app = create_fastapi_app(
        factory, ShopSimAction, ShopSimObservation, max_concurrent_envs=slots, env_name=ENV_NAME,
        state_cls=ShopSimState,
    )
    install_error_answers(app)
    return app


def install_error_answers(app: Any) -> None:
    """One JSON shape for every HTTP error of the OpenEnv app (see the module docstring)."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    from ..server.http_errors import VALIDATION_ERROR, http_code, not_json, row_of

    async def library_error(_: Any, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ShopSimError)
        row = row_of(exc)
        return JSONResponse({"detail": str(exc), "code": row.code}, status_code=row.status)

    def problems(errors: Any) -> str:
        return "invalid request: " + "; ".join(
            f"{'.'.join(str(part) for part in err.get('loc', ()))}: {err.get('msg', 'invalid')}"
            if isinstance(err, dict) else str(err)
            for err in errors
        )

    async def invalid_body(_: Any, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        undecodable = not_json(exc.errors())
        if undecodable is not None:  # a plain 400, as on serve's APIs
            return await library_error(_, undecodable)
        return JSONResponse({"detail": problems(exc.errors()), "code": VALIDATION_ERROR.code},
                            status_code=VALIDATION_ERROR.status)

    async def http_error(_: Any, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else problems(exc.detail)  # OpenEnv's 422: a list
        return JSONResponse({"detail": detail, "code": http_code(exc.status_code)},
                            status_code=exc.status_code, headers=exc.headers)

    app.add_exception_handler(ShopSimError, library_error)
    app.add_exception_handler(RequestValidationError, invalid_body)
    app.add_exception_handler(HTTPException, http_error)


def serve_openenv(data: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 8010, slots: int = 8,
                  guard: Guard | None = None, idle_timeout: float | None = 600.0,
                  max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, uvicorn_options: dict[str, Any] | None = None,
                  ) -> None:
    """Serve behind the shared edge (server/edge.py): Host/Origin/key checks, size limits, idle reclaim."""
    import uvicorn

    app = GuardedApp(create_openenv_app(data, slots=slots), guard or Guard(open_paths=frozenset({"/health"})),
                     max_message_bytes=max_message_bytes, idle_timeout=idle_timeout)
    uvicorn.run(app, host=host, port=port, log_level="info", **(uvicorn_options or {}))

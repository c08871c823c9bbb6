"""The OpenEnv server: OpenEnv's own app factory over ``ShopSimEnvironment`` (``shopsimrl serve-openenv``).

Episodes go over OpenEnv's WebSocket session protocol (``/ws``): its HTTP ``/reset`` and ``/step`` build a fresh
environment per request, so only the WebSocket keeps an episode. ``slots`` is ``max_concurrent_envs``; one more
session is answered with OpenEnv's ``CAPACITY_REACHED`` error.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app

from ..env.shop_env import ShopWorld
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
    return create_fastapi_app(
        factory, ShopSimAction, ShopSimObservation, max_concurrent_envs=slots, env_name=ENV_NAME,
        state_cls=ShopSimState,
    )


def serve_openenv(data: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 8010, slots: int = 8,
                  guard: Guard | None = None, idle_timeout: float | None = 600.0,
                  max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, uvicorn_options: dict[str, Any] | None = None,
                  ) -> None:
    """Serve behind the shared edge (server/edge.py): Host/Origin/key checks, size limits, idle reclaim."""
    import uvicorn

    app = GuardedApp(create_openenv_app(data, slots=slots), guard or Guard(open_paths=frozenset({"/health"})),
                     max_message_bytes=max_message_bytes, idle_timeout=idle_timeout)
    uvicorn.run(app, host=host, port=port, log_level="info", **(uvicorn_options or {}))

"""ShopSimRL as an OpenEnv environment (extra ``openenv``: ``pip install 'shopsimrl[openenv]'``).

``models`` holds the typed Action/Observation/State, ``environment`` the ``Environment`` subclass over one shared
read-only ``ShopWorld``, ``server`` the app from OpenEnv's own factory (WebSocket sessions, ``max_concurrent_envs``),
``client`` the ``EnvClient`` subclass and ``harness`` the resource-session factory for OpenEnv's harness layer.
Names are imported lazily so that ``shopsimrl`` (and its CLI) works without the extra.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "ShopSimAction": ".models", "ShopSimObservation": ".models", "ShopSimState": ".models",
    "ShopSimEnvironment": ".environment", "ShopSimClient": ".client", "ShopSimSessionFactory": ".harness",
    "create_openenv_app": ".server",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_LAZY[name], __name__), name)

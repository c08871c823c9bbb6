"""``app`` for the ``openenv.yaml`` manifest: the server over ``$SHOPSIM_DATA`` with ``$SHOPSIM_SLOTS`` sessions."""

from __future__ import annotations

import os

from ..errors import ShopSimError
from ..server.edge import GuardedApp
from ..server.guard import Guard
from .server import create_openenv_app

_data = os.environ.get("SHOPSIM_DATA")
if not _data:
    raise ShopSimError("set SHOPSIM_DATA to a prepared data directory (or run `shopsimrl serve-openenv --data DIR`)")
# behind the shared edge with its defaults (loopback and IP hosts, same-origin browsers, 10-minute idle reclaim)
app = GuardedApp(create_openenv_app(_data, slots=int(os.environ.get("SHOPSIM_SLOTS", "8"))),
                 Guard(open_paths=frozenset({"/health"})), idle_timeout=600.0)

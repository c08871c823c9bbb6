"""``app`` for the ``openenv.yaml`` manifest: the server over ``$SHOPSIM_DATA`` with ``$SHOPSIM_SLOTS`` sessions."""

from __future__ import annotations

import os

from ..errors import ShopSimError
from .server import create_openenv_app

_data = os.environ.get("SHOPSIM_DATA")
if not _data:
    raise ShopSimError("set SHOPSIM_DATA to a prepared data directory (or run `shopsimrl serve-openenv --data DIR`)")
app = create_openenv_app(_data, slots=int(os.environ.get("SHOPSIM_SLOTS", "8")))

"""The HTTP service: the reference ``/api/shop_agent`` API and ``/v1/sessions`` over leased in-process sessions,
plus the browser UIs (agent view, experiment replay)."""

from ..errors import LeaseError, PoolTimeout, ReplayError, ServiceError, SessionNotFound
from .app import create_app
from .client import AsyncShopClient, ShopClient
from .http_errors import ERROR_TABLE
from .leases import LeasePool
from .replay import RunsStore
from .service import EnvService

__all__ = [
    "ERROR_TABLE", "AsyncShopClient", "EnvService", "LeaseError", "LeasePool", "PoolTimeout", "ReplayError",
    "RunsStore", "ServiceError", "SessionNotFound", "ShopClient", "create_app",
]

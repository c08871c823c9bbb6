"""The HTTP service: the reference ``/api/shop_agent`` API and ``/v1/sessions`` over leased in-process sessions,
plus the browser UIs (agent view, experiment replay)."""

from .app import create_app
from .client import AsyncShopClient, ServiceError, ShopClient
from .leases import LeaseError, LeasePool, PoolTimeout
from .replay import ReplayError, RunsStore
from .service import EnvService, ServiceRequestError

__all__ = [
    "AsyncShopClient", "EnvService", "LeaseError", "LeasePool", "PoolTimeout", "ReplayError", "RunsStore",
    "ServiceError", "ServiceRequestError", "ShopClient", "create_app",
]

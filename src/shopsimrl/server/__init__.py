"""The HTTP service: the reference ``/api/shop_agent`` API over leased in-process sessions."""

from .app import create_app
from .client import AsyncShopClient, ServiceError, ShopClient
from .leases import LeaseError, LeasePool, PoolTimeout

__all__ = ["AsyncShopClient", "LeaseError", "LeasePool", "PoolTimeout", "ServiceError", "ShopClient", "create_app"]

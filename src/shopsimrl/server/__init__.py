"""The HTTP service: the reference ``/api/shop_agent`` API over leased in-process sessions."""

from .app import create_app
from .leases import LeaseError, LeasePool, PoolTimeout

__all__ = ["LeaseError", "LeasePool", "PoolTimeout", "create_app"]

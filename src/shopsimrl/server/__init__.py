"""The HTTP service: the reference ``/api/shop_agent`` API and ``/v1/sessions`` over leased in-process sessions,
plus the browser UIs (agent view, experiment replay)."""

from ..errors import AdmissionError, LeaseError, RequestError, ServiceError
from .app import create_app
from .client import AsyncShopClient, ShopClient
from .http_errors import CLASS_STATUS, STATUS_OF_CODE
from .leases import LeasePool
from .replay import RunsStore
from .service import EnvService

__all__ = [
    "CLASS_STATUS",
    "STATUS_OF_CODE",
    "AdmissionError",
    "AsyncShopClient",
    "EnvService",
    "LeaseError",
    "LeasePool",
    "RequestError",
    "RunsStore",
    "ServiceError",
    "ShopClient",
    "create_app",
]

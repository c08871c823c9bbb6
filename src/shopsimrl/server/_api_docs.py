"""``/docs`` without a CDN: Swagger UI's assets come from the ``fastapi-offline`` package, served locally.

FastAPI's default docs page loads Swagger UI from jsDelivr, so it is blank on a machine without internet
(the normal case for a local simulator). ``fastapi-offline`` ships the same Swagger UI bundle and CSS as
package data; only those files are used here (the app is not rebuilt), mounted under ``/docs/assets``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

from ..errors import ShopSimError

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")


def swagger_assets_dir() -> Path:
    """The directory holding the packaged Swagger UI files (found without importing the package)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise ShopSimError("the API docs need the `fastapi-offline` package (a core dependency): reinstall shopsimrl")
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    missing = [name for name in ASSET_FILES if not (folder / name).is_file()]
    if missing:
        raise ShopSimError(f"fastapi-offline at {folder} lacks the Swagger UI files {missing}")
    return folder


def install_offline_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (Swagger UI over ``app.openapi_url``) with every asset from this server.

    Without the assets (a stale environment) the service still starts; ``/docs`` then says what is missing
    and points at ``/openapi.json``, rather than the whole server failing over its documentation page.
    """
    title = f"{app.title} - API docs"
    openapi_url = app.openapi_url or "/openapi.json"
    try:
        assets = swagger_assets_dir()
    except ShopSimError as exc:
        problem = str(exc)

        @app.get(DOCS_URL, include_in_schema=False)
        async def docs_unavailable() -> HTMLResponse:
            return HTMLResponse(f"<!doctype html><title>{title}</title><p>{problem}</p>"
                                f'<p>The schema is at <a href="{openapi_url}">{openapi_url}</a>.</p>', status_code=503)
        return
    app.mount(ASSETS_URL, StaticFiles(directory=assets), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

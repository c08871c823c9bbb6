"""The browser UIs (agent view, experiment replay) as static files, and the read-only replay JSON API.

Plain HTML + JavaScript shipped as package data under ``ui/``; no build step. Assets are served only from
a fixed allow-list (the files in that folder), uncached, so a page always matches the server it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse

from ..errors import RequestError
from .http_errors import error_payload, status_of
from .models import ErrorBody
from .replay import RUN_NAME_PATTERN, RunsStore

UI_DIR = Path(__file__).parent / "ui"
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
               ".css": "text/css; charset=utf-8"}
NO_CACHE = {"Cache-Control": "no-store, max-age=0"}
#: The UI pages load only their own scripts and styles, talk only to this server and cannot be framed
#: (clickjacking) or sniffed into another type; no inline script or style is allowed.
PAGE_HEADERS = {
    **NO_CACHE,
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _asset(name: str) -> FileResponse | JSONResponse:
    assets = {path.name: path for path in UI_DIR.iterdir() if path.suffix in MEDIA_TYPES}
    path = assets.get(name)
    if path is None:
        return JSONResponse({"error": f"no UI asset named {name!r}"}, status_code=404)
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=PAGE_HEADERS)


def ui_router(runs: RunsStore) -> APIRouter:
    router = APIRouter()

    @router.get("/debug-ui", include_in_schema=False)
    @router.get("/debug-ui/", include_in_schema=False)
    async def agent_view() -> Any:
        return _asset("agent.html")

    @router.get("/debug-ui/{name}", include_in_schema=False)
    async def asset(name: str) -> Any:
        return _asset(name)

    @router.get("/replay-ui", include_in_schema=False)
    @router.get("/replay-ui/", include_in_schema=False)
    async def replay_view() -> Any:
        return _asset("replay.html")

    errors: dict[int | str, dict[str, Any]] = {400: {"model": ErrorBody}, 404: {"model": ErrorBody}}
    # The pattern is documented, not enforced by FastAPI: RunsStore checks it and answers 400 itself.
    run_name = PathParam(description="a run directory's name inside the runs directory",
                         json_schema_extra={"pattern": RUN_NAME_PATTERN})

    def guarded(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except RequestError as exc:
            return JSONResponse(error_payload(exc), status_code=status_of(exc))

    @router.get("/api/runs", tags=["replay"], summary="Runs in the runs directory, newest first")
    def list_runs() -> Any:  # plain def: file reads run in the thread pool, not on the event loop
        return guarded(runs.list_runs)

    @router.get("/api/runs/{run}", tags=["replay"], responses=errors, summary="A run's summary and episode list")
    def run(run: str = run_name) -> Any:
        return guarded(runs.run, run)

    # ``:path``: an episode id may contain "/" (sent as %2F, which the server decodes before routing)
    @router.get("/api/runs/{run}/episodes/{episode_id:path}", tags=["replay"], responses=errors,
                summary="One episode's trace and its target-vs-purchase comparison")
    def episode(run: str = run_name, episode_id: str = PathParam(description="an episode_id of the run's traces")) -> Any:
        return guarded(runs.episode, run, episode_id)

    return router

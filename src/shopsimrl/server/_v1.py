"""The resource-style API: a session is a resource named by its lease id, over the same ``EnvService``.

``POST /v1/sessions`` is the reference ``reset``, ``POST .../step`` is ``interact``, ``POST .../terminate`` is
``terminate``, ``DELETE`` is ``release_one``; ``GET`` reads the current page without stepping. A released,
reclaimed or unknown session id is 404 here (the resource is gone); a step after the end is 409.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Query

from ..contract import ACTION_LIMIT, visible_instruction
from ..env.shop_env import ShopEnv
from ..errors import LeaseError
from .leases import Lease
from .models import (
    CreateSession,
    DialogueTranscript,
    ErrorBody,
    Released,
    SessionCreated,
    SessionState,
    StepRequest,
    StepResult,
    TaskList,
    TerminateRequest,
)
from .service import EnvService

TASK_PAGE = 500  # default /v1/tasks page size (the default catalog's full list is ~3 MB of JSON)
MAX_TASK_PAGE = 2000
SessionId = Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$", description="the session's lease id")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody} for status in (*statuses, 422)}


def v1_router(service: EnvService) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["sessions"])

    def find(session_id: str) -> Lease[ShopEnv]:
        try:
            return service.find(session_id)
        except LeaseError as exc:
            raise LeaseError(str(exc), code="session_not_found") from exc

    task_rows: list[list[dict[str, Any]]] = []  # built once: the catalog of a running server never changes
    building = asyncio.Lock()

    def build_rows() -> list[dict[str, Any]]:
        rows = []
        for task_id, goal in sorted(service.world.catalog.goals.items()):
            has_persona = bool(goal.get("user_persona"))  # the task's own mode
            rows.append({"task_id": task_id, "has_persona": has_persona,
                         "preview": visible_instruction(goal, has_persona)[:48]})
        return rows

    async def all_tasks() -> list[dict[str, Any]]:
        """The task list, read in a worker thread the first time (~0.3 s on the default catalog: the event
        loop keeps serving meanwhile)."""
        async with building:
            if not task_rows:
                task_rows.append(await asyncio.to_thread(build_rows))
        return task_rows[0]

    @router.get("/tasks", response_model=TaskList, summary="Active task ids (for choosing one), a page at a time")
    async def tasks(offset: int = Query(0, ge=0, description="index of the first task of the page"),
                    limit: int = Query(TASK_PAGE, ge=1, le=MAX_TASK_PAGE, description="page size")) -> dict[str, Any]:
        rows = await all_tasks()
        end = offset + limit
        return {"tasks": rows[offset:end], "total": len(rows), "offset": offset,
                "next_offset": end if end < len(rows) else None}

    @router.post("/sessions", response_model=SessionCreated, response_model_exclude_unset=True, status_code=201,
                  responses=_errors(400, 404, 503),
                 summary="Start an episode (reset); queues FIFO for a slot")
    async def create(body: CreateSession) -> dict[str, Any]:
        lease, payload = await service.reset(
            body.task_id, persona=body.persona, interaction_mode=body.interaction_mode,
            include_private_goal=body.include_private_goal, wait_timeout=body.wait_timeout, shopper=body.shopper,
            shopper_seed=body.shopper_seed,
        )
        payload.update(session_id=lease.lease_id, env_idx=lease.slot)
        return payload

    @router.get("/sessions/{session_id}", response_model=SessionState, responses=_errors(404),
                summary="The session's current page, without stepping")
    async def state(session_id: str = SessionId) -> dict[str, Any]:
        return await service.state_async(find(session_id))

    @router.post("/sessions/{session_id}/step", response_model=StepResult, response_model_exclude_unset=True, responses=_errors(400, 404, 409),
                 summary="One action (interact)")
    async def step(body: StepRequest, session_id: str = SessionId) -> dict[str, Any]:
        return await service.step_async(find(session_id), body.action)

    @router.post("/sessions/{session_id}/terminate", response_model=StepResult, response_model_exclude_unset=True, responses=_errors(400, 404, 409),
                 summary="End the episode with zero reward (action_limit or generation_length)")
    async def terminate(body: TerminateRequest | None = None, session_id: str = SessionId) -> dict[str, Any]:
        return await service.terminate_async(find(session_id), body.reason if body is not None else ACTION_LIMIT)

    @router.get("/sessions/{session_id}/dialogue_transcript", response_model=DialogueTranscript,
                responses=_errors(400, 404),
                summary="The shopper's private transcript (after the episode, or for an include_private_goal reset)")
    async def transcript(session_id: str = SessionId) -> dict[str, Any]:
        return service.dialogue_transcript(find(session_id))

    @router.delete("/sessions/{session_id}", response_model=Released, responses=_errors(404),
                   summary="Release the session's slot")
    async def release(session_id: str = SessionId) -> dict[str, Any]:
        service.release(find(session_id))
        return {"released": True, "session_id": session_id}

    return router

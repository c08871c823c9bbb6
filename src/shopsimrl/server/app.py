"""FastAPI application: the reference ``POST /api/shop_agent`` contract (env_spec §9.2) and ``GET /healthz``.

A thin layer: it checks the request, maps a lease to its in-process ``ShopEnv`` and turns library errors
into 4xx JSON errors. One ``ShopWorld`` (catalog + index) per process is shared by all sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..env.actions import extract_action
from ..env.session import TERMINATION_REASONS
from ..env.shop_env import ShopEnv, ShopWorld
from ..errors import EpisodeTerminatedError, ShopSimError, UnknownTaskError
from ..versions import ENVIRONMENT_VERSION, OBSERVATION_VERSION, PRIMARY_REWARD
from .leases import LeaseError, LeasePool, PoolTimeout

DEFAULT_SLOTS = 256
DEFAULT_IDLE_TIMEOUT = 600.0
REAP_INTERVAL = 5.0


class ClientError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(
    world: ShopWorld,
    *,
    slots: int = DEFAULT_SLOTS,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    reset_wait_timeout: float | None = None,
) -> FastAPI:
    pool: LeasePool[ShopEnv] = LeasePool(slots, idle_timeout=idle_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async def reaper() -> None:
            while True:
                await asyncio.sleep(REAP_INTERVAL)
                pool.reclaim_idle()

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()

    app = FastAPI(title="ShopSimRL environment service", version=ENVIRONMENT_VERSION, lifespan=lifespan)
    app.state.pool = pool
    app.state.world = world

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {
            "ready": True,
            "environment_slots": pool.size,
            "free_slots": pool.free_slots,
            "waiting_resets": pool.waiting,
            "tasks": len(world.catalog.goals),
            "environment_version": ENVIRONMENT_VERSION,
            "primary_reward": PRIMARY_REWARD,
            "observation_version": OBSERVATION_VERSION,
            "debug_ui": "/debug-ui",
            "replay_ui": "/replay-ui",
        }

    @app.post("/api/shop_agent")
    async def shop_agent(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body must be a JSON object")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        action = body.get("action")
        handlers = {
            "reset": _reset, "interact": _interact, "terminate": _terminate,
            "release_one": _release_one, "release_all": _release_all,
        }
        handler = handlers.get(action) if isinstance(action, str) else None
        if handler is None:
            return _error(400, f"unsupported action: {action!r}")
        try:
            return JSONResponse({"result": await handler(body)})
        except ClientError as exc:
            return _error(exc.status, str(exc))
        except LeaseError as exc:
            return _error(409, str(exc))
        except PoolTimeout as exc:
            return _error(503, str(exc))
        except UnknownTaskError as exc:
            return _error(404, str(exc))
        except EpisodeTerminatedError as exc:
            return _error(409, str(exc))
        except (ShopSimError, ValueError, TypeError) as exc:
            return _error(400, str(exc))

    def _lease_fields(body: dict[str, Any], action: str) -> tuple[int, str]:
        slot, lease_id = body.get("env_idx"), body.get("lease_id")
        if isinstance(slot, bool) or not isinstance(slot, int) or not isinstance(lease_id, str) or not lease_id:
            raise ClientError(400, f"{action} requires a valid env_idx and lease_id")
        return slot, lease_id

    async def _reset(body: dict[str, Any]) -> dict[str, Any]:
        if "env_idx" in body:
            raise ClientError(400, "reset must not include env_idx; the server assigns a slot")
        if "idx" not in body:
            raise ClientError(400, "reset action requires idx parameter")
        task_id = body["idx"]
        if isinstance(task_id, bool) or not isinstance(task_id, int):
            raise ClientError(400, "task idx must be an integer")
        mode = body.get("interaction_mode", "single_turn")
        persona = body.get("if_persona", False)
        private = body.get("include_private_goal", False)
        if not isinstance(persona, bool) or not isinstance(private, bool):
            raise ClientError(400, "if_persona and include_private_goal must be booleans")
        world.catalog.goal(task_id)  # fail before waiting for a slot
        env = world.new_env()
        wait = body.get("wait_timeout", reset_wait_timeout)
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0):
            raise ClientError(400, "wait_timeout must be a non-negative number of seconds")
        lease = await pool.acquire(env, wait_timeout=wait)
        try:
            payload = env.reset(
                task_id, persona=persona, interaction_mode=mode, include_private_goal=private,
                session_id=f"slot-{lease.slot}-{task_id}",
            )
        except BaseException:
            pool.release(lease.slot, lease.lease_id)
            raise
        payload.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return payload

    async def _interact(body: dict[str, Any]) -> dict[str, Any]:
        slot, lease_id = _lease_fields(body, "interact")
        lease = pool.get(slot, lease_id)
        response = body.get("response")
        if not isinstance(response, str):
            raise ClientError(400, "interact action requires response parameter")
        result = lease.session.step(extract_action(response))
        result.update(env_idx=slot, lease_id=lease_id)
        return result

    async def _terminate(body: dict[str, Any]) -> dict[str, Any]:
        slot, lease_id = _lease_fields(body, "terminate")
        lease = pool.get(slot, lease_id)
        reason = body.get("termination_reason", "action_limit")
        if reason not in TERMINATION_REASONS:
            raise ClientError(400, f"unsupported termination reason: {reason}")
        result = lease.session.terminate(reason)
        result.update(env_idx=slot, lease_id=lease_id, reward=0.0, message=f"Episode terminated: {reason}")
        return result

    async def _release_one(body: dict[str, Any]) -> dict[str, Any]:
        slot, lease_id = _lease_fields(body, "release_one")
        pool.release(slot, lease_id)
        return {"message": f"Environment {slot} has been released"}

    async def _release_all(body: dict[str, Any]) -> dict[str, Any]:
        pool.release_all()
        return {"message": "All environments have been initialized"}

    return app

"""Python clients (sync and async) for the service, with the same interface as the in-process ``ShopEnv``.

The lease is kept inside the client, so results look exactly like ``ShopEnv``'s and a runtime can use
either. Connection errors are retried only on idempotent calls (health, release); the lease is released
on ``close()`` and on context-manager exit.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx

from ..contract import ACTION_LIMIT, SINGLE_TURN
from ..env.tools import tools_for_state
from ..errors import PersonaUnavailableError, ShopperCallError, ShopSimError
from .guard import API_KEY_ENV

LEASE_FIELDS = ("env_idx", "lease_id")
IDEMPOTENT_RETRIES = 3


class ServiceError(ShopSimError):
    """The service answered with an error (the HTTP status is kept)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header for a server started with ``--api-key-env``; the key defaults to ``$SHOPSIM_API_KEY``."""
    import os

    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _persona_unavailable(exc: ServiceError) -> bool:
    return exc.status == 400 and "standard task without a persona" in str(exc)


# The service's 502 for a failed LLM shopper call: "shopper call failed at shopper_step_K: ..."
_SHOPPER_FAILURE = re.compile(r"shopper call failed at shopper_step_(\d{1,6}): ")


def _unwrap(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError as exc:
        raise ServiceError(response.status_code, response.text[:200]) from exc
    if response.status_code != 200 or "error" in payload:
        message = str(payload.get("error", payload))
        failed = _SHOPPER_FAILURE.match(message) if response.status_code == 502 else None
        if failed is not None:  # the same typed error as in process, so traces name shopper_step_K
            raise ShopperCallError(int(failed.group(1)), message[failed.end():])
        raise ServiceError(response.status_code, message)
    result: dict[str, Any] = payload["result"]
    return result


class _Base:
    def __init__(self) -> None:
        self._lease: dict[str, Any] | None = None
        self._state: dict[str, Any] | None = None
        self._done = False

    def _strip(self, result: dict[str, Any]) -> dict[str, Any]:
        for key in LEASE_FIELDS:
            result.pop(key, None)
        self._state = result.get("observation_state")
        self._done = bool(result.get("done"))
        return result

    def _reset_body(self, task_id: int, persona: bool | None, interaction_mode: str, include_private_goal: bool,
                    shopper: str | None = None, shopper_seed: int | None = None) -> dict[str, Any]:
        body = {"action": "reset", "idx": task_id, "if_persona": persona, "interaction_mode": interaction_mode,
                "include_private_goal": include_private_goal}
        if shopper is not None:  # dialogue mode; absent otherwise, so the reference body is unchanged
            body["shopper"] = shopper
        if shopper_seed is not None:  # the LLM shopper's request seed (the episode seed)
            body["shopper_seed"] = shopper_seed
        return body

    def _require_lease(self) -> dict[str, Any]:
        if self._lease is None:
            raise ShopSimError("no active episode: call reset(task_id) first")
        return self._lease

    def tools(self) -> list[dict[str, Any]]:
        if self._state is None:
            raise ShopSimError("no active episode: call reset(task_id) first")
        return tools_for_state(self._state)

    def observation_state(self) -> dict[str, Any]:
        if self._state is None:
            raise ShopSimError("no active episode: call reset(task_id) first")
        return self._state

    @property
    def done(self) -> bool:
        return self._done


class ShopClient(_Base):
    """Synchronous client with ``ShopEnv``'s methods: ``reset`` (releases a held lease first), ``step``,
    ``terminate``, ``tools``, ``observation_state``, ``done``; ``release()`` gives the slot back without
    closing the connection, ``close()`` releases and closes (also on ``with`` exit)."""

    def __init__(self, base_url: str = "http://127.0.0.1:5700", *, timeout: float = 30.0,
                 api_key: str | None = None) -> None:
        super().__init__()
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=auth_headers(api_key))

    def _post(self, body: dict[str, Any], *, idempotent: bool = False, timeout: Any = httpx.USE_CLIENT_DEFAULT) -> dict[str, Any]:
        for attempt in range(IDEMPOTENT_RETRIES if idempotent else 1):
            try:
                return _unwrap(self._http.post("/api/shop_agent", json=body, timeout=timeout))
            except httpx.TransportError:
                if attempt + 1 >= (IDEMPOTENT_RETRIES if idempotent else 1):
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    def reset(self, task_id: int, persona: bool | None = None, interaction_mode: str = SINGLE_TURN, *,
              include_private_goal: bool = False, wait_timeout: float | None = None,
              shopper: str | None = None, shopper_seed: int | None = None) -> dict[str, Any]:
        """Start an episode, as ``ShopEnv.reset``: a lease still held (a finished or running episode) is
        released first; ``persona=None`` takes the task's own mode, ``True`` on a standard task raises
        :class:`PersonaUnavailableError`."""
        self.release()
        body = self._reset_body(task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed)
        if wait_timeout is not None:
            body["wait_timeout"] = wait_timeout
        try:
            result = self._post(body, timeout=httpx.Timeout(30.0, read=None))  # a reset may queue for a slot
        except ServiceError as exc:
            if _persona_unavailable(exc):
                raise PersonaUnavailableError(task_id) from exc
            raise
        self._lease = {key: result[key] for key in LEASE_FIELDS}
        return self._strip(result)

    def step(self, action: str) -> dict[str, Any]:
        return self._strip(self._post({"action": "interact", **self._require_lease(), "response": action}))

    def terminate(self, reason: str = ACTION_LIMIT) -> dict[str, Any]:
        body = {"action": "terminate", **self._require_lease(), "termination_reason": reason}
        return self._strip(self._post(body))

    def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                self._post({"action": "release_one", **lease}, idempotent=True)
            except ServiceError as exc:
                if exc.status != 409:  # already reclaimed: nothing left to release
                    raise

    def close(self) -> None:
        try:
            self.release()
        finally:
            self._http.close()

    def __enter__(self) -> ShopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncShopClient(_Base):
    """Asynchronous client with the same methods as ``ShopClient`` (awaitable)."""

    def __init__(self, base_url: str = "http://127.0.0.1:5700", *, timeout: float = 30.0,
                 api_key: str | None = None) -> None:
        super().__init__()
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=auth_headers(api_key))

    async def _post(self, body: dict[str, Any], *, idempotent: bool = False, timeout: Any = httpx.USE_CLIENT_DEFAULT) -> dict[str, Any]:
        import asyncio

        attempts = IDEMPOTENT_RETRIES if idempotent else 1
        for attempt in range(attempts):
            try:
                return _unwrap(await self._http.post("/api/shop_agent", json=body, timeout=timeout))
            except httpx.TransportError:
                if attempt + 1 >= attempts:
                    raise
                await asyncio.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    async def reset(self, task_id: int, persona: bool | None = None, interaction_mode: str = SINGLE_TURN, *,
                    include_private_goal: bool = False, wait_timeout: float | None = None,
                    shopper: str | None = None, shopper_seed: int | None = None) -> dict[str, Any]:
        """As :meth:`ShopClient.reset` (a held lease is released first)."""
        await self.release()
        body = self._reset_body(task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed)
        if wait_timeout is not None:
            body["wait_timeout"] = wait_timeout
        try:
            result = await self._post(body, timeout=httpx.Timeout(30.0, read=None))
        except ServiceError as exc:
            if _persona_unavailable(exc):
                raise PersonaUnavailableError(task_id) from exc
            raise
        self._lease = {key: result[key] for key in LEASE_FIELDS}
        return self._strip(result)

    async def step(self, action: str) -> dict[str, Any]:
        return self._strip(await self._post({"action": "interact", **self._require_lease(), "response": action}))

    async def terminate(self, reason: str = ACTION_LIMIT) -> dict[str, Any]:
        body = {"action": "terminate", **self._require_lease(), "termination_reason": reason}
        return self._strip(await self._post(body))

    async def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                await self._post({"action": "release_one", **lease}, idempotent=True)
            except ServiceError as exc:
                if exc.status != 409:
                    raise

    async def close(self) -> None:
        try:
            await self.release()
        finally:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncShopClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

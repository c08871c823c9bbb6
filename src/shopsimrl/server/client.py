"""Python clients (sync and async) for the service, with the same interface as the in-process ``ShopEnv``.

The lease is kept inside the client, so results look exactly like ``ShopEnv``'s and a runtime can use
either. Errors too: an error answer names its class by a stable code (``http_errors.py``), and the client
raises that class with the service's message, so ``RequestError`` (``unknown_task``), ``EpisodeStateError`` (``episode_terminated``),
``RequestError`` (``persona_unavailable``), ``RequestError`` (``dialogue_unavailable``), ``RequestError`` (``invalid_request``)/``RequestError`` (``invalid_action``), ``LeaseError``
and ``AdmissionError`` (``no_free_slot``) are caught the same way in process and over HTTP. ``ServiceError`` is left for the
transport: no connection, a 5xx or a body that is not the service's JSON. The lease is released on ``close()``
and on context-manager exit.

Retries never execute anything twice. Every step carries its ``step_index``, which the service checks: the
next index executes, a repeat of the last executed one gets that step's result back without executing it.
So a step whose connection broke without an answer (the server closed a reused keep-alive connection, a reset
or write error) is sent again with the same index; a timeout is not retried (the step may still be running).
Release is retried on the same errors; reset and terminate only when the connection was never made.
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any

import httpx

from ..contract import ACTION_LIMIT, SINGLE_TURN
from ..env.tools import tools_for_state
from ..errors import EpisodeStateError, LeaseError, RequestError, ServiceError
from .guard import API_KEY_ENV
from .http_errors import rebuild

LEASE_FIELDS = ("env_idx", "lease_id")
IDEMPOTENT_RETRIES = 3
# No answer byte came back: the request was not processed, or (a step with its index) processing it twice is
# impossible. Timeouts are not here: the server may still be working on the request.
UNANSWERED = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
NEVER_SENT = (httpx.ConnectError,)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header for a server started with ``--api-key-env``; the key defaults to ``$SHOPSIM_API_KEY``."""
    import os

    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


NO_EPISODE = "no active episode: call reset(task_id) first"  # ShopEnv's message


def _unwrap(response: httpx.Response) -> dict[str, Any]:
    """The result of a 200 answer; otherwise the error it names by its code, or ``ServiceError``."""
    status = response.status_code
    try:
        payload = response.json()
    except ValueError as exc:
        raise ServiceError(status, response.text[:200] or "an empty body instead of JSON") from exc
    if not isinstance(payload, dict):
        raise ServiceError(status, "the answer is not a JSON object")
    if status == 200 and "error" not in payload and isinstance(payload.get("result"), dict):
        result: dict[str, Any] = payload["result"]
        return result
    message, code = str(payload.get("error", payload)), payload.get("code")
    error = rebuild(code, message) if isinstance(code, str) else None
    if error is not None:
        raise error
    raise ServiceError(status, message, code if isinstance(code, str) else None)


def _unreachable(base_url: object, exc: httpx.TransportError) -> ServiceError:
    return ServiceError(0, f"cannot reach the service at {base_url}: {exc.__class__.__name__}: {exc}")


class _Base:
    """What both clients share: the lease they hold and the last page, kept apart from the results they return."""

    def __init__(self) -> None:
        self._lease: dict[str, Any] | None = None
        self._state: dict[str, Any] | None = None
        self._done = False
        self._steps = 0  # steps executed in this episode: the next step's index is this + 1

    def _step_body(self, action: str) -> dict[str, Any]:
        return {"action": "interact", **self._require_lease(), "response": action, "step_index": self._steps + 1}

    def _strip(self, result: dict[str, Any]) -> dict[str, Any]:
        for key in LEASE_FIELDS:
            result.pop(key, None)
        state = result.get("observation_state")
        # kept apart from the result the caller receives, so mutating one never changes the other (as in ShopEnv)
        self._state = copy.deepcopy(state) if isinstance(state, dict) else None
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
            raise EpisodeStateError(NO_EPISODE, code="no_active_episode")
        return self._lease

    def tools(self) -> list[dict[str, Any]]:
        """The function tools the current page offers, as ``ShopEnv.tools`` (built locally, no request).

        Returns:
            OpenAI-style tool schemas for the last result's page.

        Raises:
            EpisodeStateError: before the first reset.
        """
        if self._state is None:
            raise EpisodeStateError(NO_EPISODE, code="no_active_episode")
        return tools_for_state(self._state)

    def observation_state(self) -> dict[str, Any]:
        """The structured page of the last result, as ``ShopEnv.observation_state`` (no request).

        Returns:
            A fresh dict on every call, safe to mutate.

        Raises:
            EpisodeStateError: before the first reset.
        """
        if self._state is None:
            raise EpisodeStateError(NO_EPISODE, code="no_active_episode")
        return copy.deepcopy(self._state)  # a fresh dict on every call, as ShopEnv gives

    @property
    def done(self) -> bool:
        """True once the last result said the episode ended (False before the first reset)."""
        return self._done


class ShopClient(_Base):
    """Synchronous client with ``ShopEnv``'s methods: ``reset`` (releases a held lease first), ``step``,
    ``terminate``, ``tools``, ``observation_state``, ``done``; ``release()`` gives the slot back without
    closing the connection, ``close()`` releases and closes (also on ``with`` exit)."""

    def __init__(self, base_url: str = "http://127.0.0.1:5700", *, timeout: float = 30.0,
                 api_key: str | None = None) -> None:
        """Connect lazily to a ``shopsimrl serve`` service (nothing is sent before ``reset``).

        Args:
            base_url: the service's root URL.
            timeout: seconds per request (a reset waiting for a slot is bounded by ``wait_timeout`` instead).
            api_key: the service's key, sent as a bearer token (None: ``$SHOPSIM_API_KEY`` when set, else none).
        """
        super().__init__()
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=auth_headers(api_key))

    def _post(self, body: dict[str, Any], *, idempotent: bool = False, timeout: Any = httpx.USE_CLIENT_DEFAULT) -> dict[str, Any]:
        retry_on = UNANSWERED if idempotent else NEVER_SENT
        for attempt in range(IDEMPOTENT_RETRIES):
            try:
                return _unwrap(self._http.post("/api/shop_agent", json=body, timeout=timeout))
            except httpx.TransportError as exc:
                if attempt + 1 >= IDEMPOTENT_RETRIES or not isinstance(exc, retry_on):
                    raise _unreachable(self._http.base_url, exc) from exc
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    def reset(self, task_id: int, persona: bool | None = None, interaction_mode: str = SINGLE_TURN, *,
              include_private_goal: bool = False, wait_timeout: float | None = None,
              shopper: str | None = None, shopper_seed: int | None = None) -> dict[str, Any]:
        """Start an episode, as ``ShopEnv.reset``: a lease still held (a finished or running episode) is
        released first; ``persona=None`` takes the task's own mode, ``True`` on a standard task raises
        :class:`RequestError` (`persona_unavailable`).

        Args:
            task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed: as ``ShopEnv.reset``.
            wait_timeout: seconds to queue for a free slot (the service's default when None; 503 after).

        Returns:
            The reset result, exactly as ``ShopEnv.reset`` gives it (lease fields kept inside the client).

        Raises:
            The errors ``ShopEnv.reset`` raises (rebuilt from the service's error code), ``AdmissionError`` (``no_free_slot``) when no
            slot frees in time, ``ServiceError`` for transport failures.
        """
        self.release()
        body = self._reset_body(task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed)
        if wait_timeout is not None:
            body["wait_timeout"] = wait_timeout
        try:
            result = self._post(body, timeout=httpx.Timeout(30.0, read=None))  # a reset may queue for a slot
        except RequestError as exc:
            if exc.code in ("unknown_task", "persona_unavailable"):
                exc.task_id = task_id  # as ShopEnv's (the message is the service's)
            raise
        self._lease = {key: result[key] for key in LEASE_FIELDS}
        self._steps = 0
        return self._strip(result)

    def step(self, action: str) -> dict[str, Any]:
        """One action, as ``ShopEnv.step``.

        Args:
            action: a canonical action string or model text with one ``Action:`` line.

        Returns:
            The step result, exactly as ``ShopEnv.step`` gives it (lease fields kept inside the client).

        Raises:
            The errors ``ShopEnv.step`` raises, ``LeaseError`` for a stale lease, ``ServiceError`` for transport
            failures.
        """
        result = self._strip(self._post(self._step_body(action), idempotent=True))
        self._steps += 1
        return result

    def terminate(self, reason: str = ACTION_LIMIT) -> dict[str, Any]:
        """End the episode, as ``ShopEnv.terminate`` (the lease stays held until ``release`` or the next reset).

        Args:
            reason: ``action_limit`` or ``generation_length``.

        Returns:
            The terminal result, exactly as ``ShopEnv.terminate`` gives it.
        """
        body = {"action": "terminate", **self._require_lease(), "termination_reason": reason}
        return self._strip(self._post(body))

    def dialogue_transcript(self) -> list[dict[str, Any]] | None:
        """The shopper's transcript, as ``ShopEnv.dialogue_transcript`` (after the episode, or a private reset)."""
        transcript: list[dict[str, Any]] | None = self._post(
            {"action": "dialogue_transcript", **self._require_lease()})["transcript"]
        return transcript

    def release(self) -> None:
        """Give the slot back to the service's pool (a no-op without a lease, or when it was already reclaimed)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(LeaseError):  # already reclaimed: nothing left to release
                self._post({"action": "release_one", **lease}, idempotent=True)

    def close(self) -> None:
        """Release the lease (if held) and close the connection; the client cannot be used afterwards."""
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
        """As :class:`ShopClient` (``base_url``, ``timeout``, ``api_key``); the connection belongs to the event
        loop that first uses it."""
        super().__init__()
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=auth_headers(api_key))

    async def _post(self, body: dict[str, Any], *, idempotent: bool = False, timeout: Any = httpx.USE_CLIENT_DEFAULT) -> dict[str, Any]:
        import asyncio

        retry_on = UNANSWERED if idempotent else NEVER_SENT
        for attempt in range(IDEMPOTENT_RETRIES):
            try:
                return _unwrap(await self._http.post("/api/shop_agent", json=body, timeout=timeout))
            except httpx.TransportError as exc:
                if attempt + 1 >= IDEMPOTENT_RETRIES or not isinstance(exc, retry_on):
                    raise _unreachable(self._http.base_url, exc) from exc
                await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    async def reset(self, task_id: int, persona: bool | None = None, interaction_mode: str = SINGLE_TURN, *,
                    include_private_goal: bool = False, wait_timeout: float | None = None,
                    shopper: str | None = None, shopper_seed: int | None = None) -> dict[str, Any]:
        """Start an episode, as :meth:`ShopClient.reset` (a held lease is released first).

        Args:
            task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed: as ``ShopEnv.reset``.
            wait_timeout: seconds to queue for a free slot (the service's default when None).

        Returns:
            The reset result, exactly as ``ShopEnv.reset`` gives it.

        Raises:
            The errors ``ShopEnv.reset`` raises, ``AdmissionError`` (``no_free_slot``), ``ServiceError`` for transport failures.
        """
        await self.release()
        body = self._reset_body(task_id, persona, interaction_mode, include_private_goal, shopper, shopper_seed)
        if wait_timeout is not None:
            body["wait_timeout"] = wait_timeout
        try:
            result = await self._post(body, timeout=httpx.Timeout(30.0, read=None))
        except RequestError as exc:
            if exc.code in ("unknown_task", "persona_unavailable"):
                exc.task_id = task_id
            raise
        self._lease = {key: result[key] for key in LEASE_FIELDS}
        self._steps = 0
        return self._strip(result)

    async def step(self, action: str) -> dict[str, Any]:
        """One action, as ``ShopEnv.step``.

        Args:
            action: a canonical action string or model text with one ``Action:`` line.

        Returns:
            The step result, exactly as ``ShopEnv.step`` gives it.

        Raises:
            The errors ``ShopEnv.step`` raises, ``LeaseError`` for a stale lease, ``ServiceError`` for transport
            failures.
        """
        result = self._strip(await self._post(self._step_body(action), idempotent=True))
        self._steps += 1
        return result

    async def terminate(self, reason: str = ACTION_LIMIT) -> dict[str, Any]:
        """End the episode, as ``ShopEnv.terminate`` (the lease stays held until ``release`` or the next reset).

        Args:
            reason: ``action_limit`` or ``generation_length``.

        Returns:
            The terminal result, exactly as ``ShopEnv.terminate`` gives it.
        """
        body = {"action": "terminate", **self._require_lease(), "termination_reason": reason}
        return self._strip(await self._post(body))

    async def dialogue_transcript(self) -> list[dict[str, Any]] | None:
        """The shopper's transcript, as ``ShopEnv.dialogue_transcript`` (after the episode, or a private reset)."""
        answer = await self._post({"action": "dialogue_transcript", **self._require_lease()})
        transcript: list[dict[str, Any]] | None = answer["transcript"]
        return transcript

    async def release(self) -> None:
        """Give the slot back to the service's pool (a no-op without a lease, or when it was already reclaimed)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(LeaseError):
                await self._post({"action": "release_one", **lease}, idempotent=True)

    async def close(self) -> None:
        """Release the lease (if held) and close the connection; the client cannot be used afterwards."""
        try:
            await self.release()
        finally:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncShopClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

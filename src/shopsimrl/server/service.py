"""The service core both HTTP APIs share: leased ``ShopEnv`` sessions over one process-wide ``ShopWorld``.

The reference ``/api/shop_agent`` API and the resource-style ``/v1/sessions`` API are two spellings of
the same operations, so they cannot drift apart: both call this class, which speaks in library errors
(``RequestError`` (``invalid_request``), ``LeaseError``, ``AdmissionError`` (``no_free_slot``), ``RequestError`` (``unknown_task``) ...) and never in HTTP;
``http_errors.py`` turns them into statuses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any

from ..contract import ACTION_LIMIT, LLM_SHOPPER, SINGLE_TURN
from ..dialogue.llm_shopper import ShopperEndpoint
from ..dialogue.registry import shopper_registry
from ..env.requests import MAX_RESPONSE_CHARS, check_reset
from ..env.shop_env import ShopEnv, ShopWorld, resolve_persona_mode
from ..errors import EpisodeStateError, RequestError
from .leases import Lease, LeasePool

DEFAULT_SLOTS = 256
DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_MAX_RESPONSE_CHARS = MAX_RESPONSE_CHARS  # one step's model text: the environment's own cap
#: Longer step texts run off the event loop (a 64K-character search takes ~0.1-0.4 s; 512 characters ~2 ms).
INLINE_STEP_CHARS = 512
LONG_STEP_THREADS = 4  # long steps at once (more wait their turn; short steps and /healthz never wait for them)
_executor: list[concurrent.futures.ThreadPoolExecutor] = []


def _long_steps() -> concurrent.futures.ThreadPoolExecutor:
    """The process's threads for long steps (made on first use)."""
    if not _executor:
        _executor.append(concurrent.futures.ThreadPoolExecutor(LONG_STEP_THREADS, thread_name_prefix="shopsim-step"))
    return _executor[0]


class EnvService:
    """Reset / step / terminate / release over a FIFO lease pool; one catalog and index for all sessions."""

    def __init__(
        self,
        world: ShopWorld,
        *,
        slots: int = DEFAULT_SLOTS,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        reset_wait_timeout: float | None = None,
        first_slot: int = 0,
        lease_prefix: str = "",
        max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
        llm_shopper: ShopperEndpoint | None = None,
    ) -> None:
        self.world = world
        self.llm_shopper = llm_shopper  # the endpoint behind shopper "llm" (None: such resets are refused)
        self.shoppers = shopper_registry(llm=llm_shopper)
        self.max_response_chars = max_response_chars
        self.pool: LeasePool[ShopEnv] = LeasePool(
            slots, idle_timeout=idle_timeout, first_slot=first_slot, lease_prefix=lease_prefix)
        self.reset_wait_timeout = reset_wait_timeout

    async def reset(
        self,
        task_id: int,
        *,
        persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN,
        include_private_goal: bool = False,
        wait_timeout: float | None = None,
        shopper: str | None = None,
        shopper_seed: int | None = None,
    ) -> tuple[Lease[ShopEnv], dict[str, Any]]:
        """Check the request (the environment's own checks, ``env.requests``, and the service's wait timeout),
        wait (FIFO) for a slot, start the episode; the slot is freed if that fails."""
        check_reset(task_id, persona=persona, interaction_mode=interaction_mode,
                    include_private_goal=include_private_goal, shopper=shopper, shopper_seed=shopper_seed,
                    offered=self.shoppers.names())
        if wait_timeout is None:
            wait_timeout = self.reset_wait_timeout
        if wait_timeout is not None and (
                isinstance(wait_timeout, bool) or not isinstance(wait_timeout, (int, float)) or not 0 <= wait_timeout <= 86_400):
            raise RequestError("wait_timeout must be a number of seconds between 0 and 86400 (as in /v1)", code="invalid_request")
        # an unknown task, or a persona reset of a standard task, fails before it waits for a slot
        resolve_persona_mode(task_id, self.world.catalog.goal(task_id), persona)
        env = self.world.new_env(shoppers=self.shoppers, max_response_chars=self.max_response_chars)
        lease = await self.pool.acquire(env, wait_timeout=wait_timeout)
        try:
            call = functools.partial(
                env.reset, task_id, persona=persona, interaction_mode=interaction_mode,
                include_private_goal=include_private_goal, session_id=f"slot-{lease.slot}-{task_id}", shopper=shopper,
                shopper_seed=shopper_seed,
            )
            # the LLM shopper's opening is an HTTP call: a worker thread keeps the event loop free
            payload = await asyncio.to_thread(call) if shopper == "llm" else call()
        except BaseException:
            self.pool.release(lease.slot, lease.lease_id)
            raise
        return lease, dict(payload)

    async def step_async(self, lease: Lease[ShopEnv], response: object, step_index: object = None) -> dict[str, Any]:
        """``step`` for the HTTP handlers, one at a time per session. It runs in a worker thread when it may take
        more than a few milliseconds (an LLM shopper's call, or text longer than ``INLINE_STEP_CHARS``: the work
        of a step grows with its text), so the event loop keeps answering every other client meanwhile."""
        async with lease.busy:
            replay = self._replay(lease, step_index)
            if replay is not None:
                return replay
            if lease.session.shopper_name == LLM_SHOPPER:
                return await asyncio.to_thread(self._record, lease, response)
            if isinstance(response, str) and len(response) > INLINE_STEP_CHARS:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(_long_steps(), self._record, lease, response)
            return self._record(lease, response)

    async def terminate_async(self, lease: Lease[ShopEnv], reason: object = ACTION_LIMIT) -> dict[str, Any]:
        """``terminate`` once the session's step in progress (if any) has ended."""
        async with lease.busy:
            return self.terminate(lease, reason)

    async def state_async(self, lease: Lease[ShopEnv]) -> dict[str, Any]:
        """``state`` once the session's step in progress (if any) has ended."""
        async with lease.busy:
            return self.state(lease)

    def lease(self, slot: object, lease_id: object) -> Lease[ShopEnv]:
        return self.pool.get(slot, lease_id)

    def find(self, session_id: str) -> Lease[ShopEnv]:
        return self.pool.find(session_id)

    @staticmethod
    def _replay(lease: Lease[ShopEnv], step_index: object) -> dict[str, Any] | None:
        """The step-index check that makes a retried step idempotent (docs/contract.md#http-reference-api).

        ``step_index`` (optional, 1-based) names the step the client means: the next one executes; the last
        executed one is a retry whose request reached the server but whose answer did not reach the client,
        and gets that step's result again without executing anything; any other index is refused.
        """
        if step_index is None:
            return None
        if isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 1:
            raise RequestError(f"step_index must be a positive integer, got {step_index!r}", code="invalid_request")
        if step_index == lease.steps and lease.last_step is not None:
            return dict(lease.last_step)
        if step_index != lease.steps + 1:
            raise RequestError(f"step_index {step_index}: this episode has executed {lease.steps} step(s), "
                                      f"so the next step is {lease.steps + 1}", code="invalid_request")
        return None

    def _record(self, lease: Lease[ShopEnv], response: object) -> dict[str, Any]:
        result = self.step(lease, response)
        lease.steps += 1
        lease.last_step = dict(result)
        return result

    def step(self, lease: Lease[ShopEnv], response: object) -> dict[str, Any]:
        """One step; ``response`` is the model's text (the session reads the action out of it, as on every
        path: docs/contract.md#model-text)."""
        return dict(lease.session.step(response))  # type: ignore[arg-type]  # ShopEnv checks it (env.requests)

    @staticmethod
    def terminate(lease: Lease[ShopEnv], reason: object = ACTION_LIMIT) -> dict[str, Any]:
        # reward 0, no action_feedback, "Episode terminated: …"; the reason is checked by ShopEnv (env.requests)
        return dict(lease.session.terminate(reason))  # type: ignore[arg-type]

    @staticmethod
    def dialogue_transcript(lease: Lease[ShopEnv]) -> dict[str, Any]:
        """The session's shopper transcript, under ShopEnv's own access rule (after the episode, or private)."""
        return {"transcript": lease.session.dialogue_transcript()}

    def release(self, lease: Lease[ShopEnv]) -> None:
        self.pool.release(lease.slot, lease.lease_id)

    def release_all(self) -> None:
        self.pool.release_all()

    @staticmethod
    def state(lease: Lease[ShopEnv]) -> dict[str, Any]:
        """A session's current page without stepping it (for the resource API and the UIs)."""
        env = lease.session
        session = env.session
        if session is None:  # cannot happen for a live lease; kept as a typed error all the same
            raise EpisodeStateError("session has no episode", code="no_active_episode")
        observation, state = session.observe()
        return {
            "session_id": lease.lease_id,
            "env_idx": lease.slot,
            "task_id": session.task_id,
            "interaction_mode": session.interaction_mode,
            "done": session.done,
            "action_count": session.action_count,
            "max_actions": session.max_actions,
            "termination_reason": session.termination_reason if session.done else None,
            "observation": observation,
            "observation_state": state,
        }

"""What an episode plays on: the asynchronous environment interface and the factories that open one per episode.

:func:`as_async_env` adapts the in-process ``ShopEnv`` (directly or in a worker thread) and the service clients
(``ShopClient``/``AsyncShopClient``) to :class:`AsyncEnv`, so the one episode loop (:mod:`.episode`) awaits every
environment alike; a sync environment that is not threaded never suspends, so the loop can run without an event
loop (:func:`~shopsimrl.agent.episode.run_sync`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, Union

from ..env.interface import AsyncShopEnvironment, ShopEnvironment
from ..errors import ServiceError

if TYPE_CHECKING:
    from ..dialogue.llm_shopper import ShopperEndpoint
    from ..env.shop_env import ShopEnv
    from ..server.client import AsyncShopClient, ShopClient


#: Worker threads for threaded in-process steps. Bounded by the cores, not asyncio's default (cores + 4): a
#: step is mostly Python that holds the GIL, so extra threads add no throughput, only more threads for the event
#: loop to lose the GIL to each time it wakes (64 concurrent episodes, 2 cores: the loop's longest wait
#: ~19 -> ~15 ms median, benchmarks/bench_rollout_concurrency.py).
STEP_THREADS = max(1, min(4, os.cpu_count() or 1))
_STEP_POOL: ThreadPoolExecutor | None = None


def _step_pool() -> ThreadPoolExecutor:
    global _STEP_POOL
    if _STEP_POOL is None:  # made on first threaded step: most processes never start its threads
        _STEP_POOL = ThreadPoolExecutor(max_workers=STEP_THREADS, thread_name_prefix="shopsim-step")
    return _STEP_POOL


class AsyncEnv(Protocol):
    async def reset(
        self, task_id: int, persona: bool | None, interaction_mode: str, shopper: str | None = None,
        *, shopper_seed: int | None = None,
    ) -> dict[str, Any]: ...
    async def step(self, action: str) -> dict[str, Any]: ...
    async def terminate(self, reason: str) -> dict[str, Any]: ...
    async def close(self) -> None: ...


EnvironmentSession = Union["ShopEnv", "ShopClient", "AsyncShopClient", ShopEnvironment, AsyncShopEnvironment]
"""What the runtime plays on: the package's three sessions or any implementation of the environment interface
(env/interface.py; the package's own return plain dicts of the same shape as the interface's TypedDicts)."""


class _Adapter:
    """Makes a sync (``ShopEnv``, ``ShopClient``) or async (``AsyncShopClient``) environment awaitable: the async
    interface is the one whose ``step`` is a coroutine function (the two Protocols differ only there)."""

    def __init__(self, env: EnvironmentSession, *, threaded: bool = False, keep_open: bool = False,
                 reset_options: Mapping[str, Any] | None = None, blocking_io: bool = False) -> None:
        self.env = env
        self.threaded = threaded
        self.blocking_io = blocking_io
        self.keep_open = keep_open
        self.reset_options = dict(reset_options or {})
        self.is_async = inspect.iscoroutinefunction(getattr(env, "step", None))

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.env, name)
        if self.is_async:
            return await method(*args, **kwargs)
        if self.threaded:
            import asyncio  # here: the CLI reads the policy registry (under agent/) without paying for asyncio
            import functools

            call = functools.partial(method, *args, **kwargs)
            pool = None if self.blocking_io else _step_pool()  # waiting on I/O holds no GIL: asyncio's wider pool
            return await asyncio.get_running_loop().run_in_executor(pool, call)
        return method(*args, **kwargs)

    async def reset(
        self, task_id: int, persona: bool | None, interaction_mode: str, shopper: str | None = None,
        *, shopper_seed: int | None = None,
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {"shopper": shopper} if shopper is not None else {}  # no shopper: the reference call
        if shopper_seed is not None:
            extra["shopper_seed"] = shopper_seed
        result: dict[str, Any] = await self._call("reset", task_id, persona=persona, interaction_mode=interaction_mode,
                                                  **extra, **self.reset_options)
        return result

    async def dialogue_transcript(self) -> list[dict[str, Any]] | None:
        """The shopper's private transcript (matched slots, noise), read after the episode on every path."""
        if getattr(self.env, "dialogue_transcript", None) is None:
            return None
        transcript: list[dict[str, Any]] | None = await self._call("dialogue_transcript")
        return transcript

    async def step(self, action: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("step", action)
        return result

    async def terminate(self, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("terminate", reason)
        return result

    async def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None and not self.keep_open:
            await self._call("close")


def as_async_env(env: EnvironmentSession, *, threaded: bool = False, keep_open: bool = False,
                 reset_options: Mapping[str, Any] | None = None, blocking_io: bool = False) -> AsyncEnv:
    """Adapt any object with the ``ShopEnv`` interface (sync or async) to :class:`AsyncEnv`.

    ``keep_open``: ``close`` leaves the env as it is (a caller that reuses one env across episodes);
    ``reset_options``: extra keyword arguments of every ``reset`` (in-process ones such as ``shopper_config``);
    ``blocking_io``: a threaded env whose calls mostly wait on the network (an LLM shopper) runs in asyncio's
    default pool, not in the core-bounded step pool.
    """
    return _Adapter(env, threaded=threaded, keep_open=keep_open, reset_options=reset_options,
                    blocking_io=blocking_io)


class EnvironmentFactory(Protocol):
    """Opens one environment session per episode and says what it is (provenance)."""

    def new(self) -> AsyncEnv: ...

    def identity(self) -> dict[str, Any]: ...


class InProcessEnvironment:
    """Sessions over a shared in-process ``ShopWorld`` (threaded: run env calls in worker threads).

    ``llm_shopper`` (a ``ShopperEndpoint``) serves ``shopper="llm"``; its calls block, so it implies threaded.
    """

    def __init__(self, world: Any, *, threaded: bool = False, llm_shopper: ShopperEndpoint | None = None) -> None:
        from ..dialogue.registry import shopper_registry

        self.world = world
        self.llm_shopper = llm_shopper
        self.shoppers = shopper_registry(llm=llm_shopper)  # the rule shopper always, the LLM one with an endpoint
        self.threaded = threaded or llm_shopper is not None

    def new(self) -> AsyncEnv:
        env = self.world.new_env(shoppers=self.shoppers)
        return as_async_env(env, threaded=self.threaded, blocking_io=self.llm_shopper is not None)

    def identity(self) -> dict[str, Any]:
        return {"adapter": "in-process", "base_url": None}


class ServiceEnvironment:
    """Sessions leased from a ``shopsimrl serve`` service through ``AsyncShopClient`` (one per episode)."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def check_reachable(self) -> None:
        """One ``GET /healthz`` before the first episode: a server that is down or a wrong URL fails the run once,
        up front (``ServiceError`` naming ``--env-url``), instead of every episode after its retries. Any HTTP
        answer counts as reachable (its errors then come with each request)."""
        import httpx

        try:
            httpx.get(f"{self.base_url}/healthz", timeout=min(self.timeout, 15.0))
        except httpx.HTTPError as exc:
            raise ServiceError(0, f"the environment server --env-url {self.base_url} cannot be reached "
                                  f"({type(exc).__name__}: {exc}); start it (`shopsimrl serve`) or fix the URL") from exc

    def new(self) -> AsyncEnv:
        from ..server.client import AsyncShopClient

        return as_async_env(AsyncShopClient(self.base_url, timeout=self.timeout))

    def identity(self) -> dict[str, Any]:
        return {"adapter": "http", "base_url": self.base_url}


class SingleEnvironment:
    """One existing environment as a factory (the play loops: the caller keeps and reuses its ``ShopEnv``)."""

    def __init__(self, env: EnvironmentSession, *, reset_options: Mapping[str, Any] | None = None) -> None:
        self.env = env
        self.reset_options = reset_options

    def new(self) -> AsyncEnv:
        return as_async_env(self.env, keep_open=True, reset_options=self.reset_options)

    def identity(self) -> dict[str, Any]:
        return {"adapter": "in-process", "base_url": None}

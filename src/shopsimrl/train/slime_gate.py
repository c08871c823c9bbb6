"""slime's group gate: at most N GRPO groups in flight per rollout worker, every sibling of an admitted group at
once (so a group is never held back by a per-episode cap while its siblings finish)."""

from __future__ import annotations

import asyncio
from typing import Any


class GroupGate:
    """At most ``limit`` groups in flight; every sibling of an admitted group runs without waiting."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._slots = asyncio.Semaphore(self.limit)
        self._running: dict[Any, int] = {}
        self._admitting: dict[Any, asyncio.Future[None]] = {}

    async def enter(self, group: Any) -> None:
        if group in self._running:
            self._running[group] += 1
            return
        pending = self._admitting.get(group)
        if pending is not None:  # a sibling is already queued for this group's slot: wait for it
            await asyncio.shield(pending)
            self._running[group] += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._admitting[group] = future
        try:
            await self._slots.acquire()
        except BaseException:
            del self._admitting[group]
            future.cancel()
            raise
        self._running[group] = 1
        del self._admitting[group]
        future.set_result(None)

    def leave(self, group: Any) -> None:
        self._running[group] -= 1
        if self._running[group] == 0:
            del self._running[group]
            self._slots.release()

    @property
    def groups_in_flight(self) -> int:
        return len(self._running)

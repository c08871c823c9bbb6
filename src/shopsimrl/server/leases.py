"""Leased session slots (docs/contract.md#leases, improved): FIFO queueing with a wait timeout, idle reclaim.

Runs inside the server's event loop: every operation is a short critical section, so no lock is needed,
and a waiter is handed a slot directly by the release that frees it (strict FIFO, no stampede).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import AdmissionError, LeaseError, RequestError

T = TypeVar("T")
#: The request's end-of-input event (server/_protocol.py ``CLIENT_EOF``), set by the app around a reset: a reset
#: that must queue leaves the queue when its client ends its input (a half-close, or a hang-up, which looks the
#: same), while one that finds a free slot is served and answered.
CLIENT_EOF: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("client_eof", default=None)


async def _first_of(waiter: asyncio.Future[int], ended: asyncio.Event | None, timeout: float | None) -> int | None:
    """The slot ``waiter`` is handed; None if ``ended`` is set first, TimeoutError after ``timeout``.
    The waiter itself is never cancelled here (the caller abandons it, handing on a slot it got at the last
    moment)."""
    if ended is None:
        return await asyncio.wait_for(asyncio.shield(waiter), timeout)
    watch: asyncio.Future[Any] = asyncio.ensure_future(ended.wait())
    pending: set[asyncio.Future[Any]] = {waiter, watch}
    try:
        await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if waiter.done():  # a cancelled waiter raises CancelledError here, as the shielded wait does
        slot: int = waiter.result()
        return slot
    if ended.is_set():
        return None
    raise asyncio.TimeoutError


@dataclass
class Lease(Generic[T]):
    slot: int
    lease_id: str
    session: T
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0  # steps executed under this lease (the step index the service checks)
    last_step: Any = None  # the last step's result, replayed to a retry of that same step index
    #: Held while a request works on the session (a step may run in a worker thread: one at a time).
    busy: asyncio.Lock = field(default_factory=asyncio.Lock, compare=False, repr=False)


class LeasePool(Generic[T]):
    """``size`` slots numbered from ``first_slot``; lease ids are ``lease_prefix`` + a uuid4 hex.

    The offset and prefix let several worker processes share one slot and lease namespace (each holds a
    disjoint range and its own prefix), so a front process can route any request by its slot or lease id.
    """

    def __init__(self, size: int, *, idle_timeout: float | None = 600.0, clock: Callable[[], float] = time.monotonic,
                 first_slot: int = 0, lease_prefix: str = ""):
        if size < 1:
            raise RequestError("the pool needs at least one slot", code="invalid_request")
        self.size = size
        self.first_slot = first_slot
        self.lease_prefix = lease_prefix
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._free: deque[int] = deque(range(first_slot, first_slot + size))
        self._leases: dict[int, Lease[T]] = {}
        self._slot_of: dict[str, int] = {}  # lease id -> slot, for the resource-style API
        self._waiters: deque[asyncio.Future[int]] = deque()

    @property
    def free_slots(self) -> int:
        return len(self._free)

    @property
    def live(self) -> int:
        return len(self._leases)

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    async def acquire(self, session: T, *, wait_timeout: float | None = None) -> Lease[T]:
        self.reclaim_idle()
        if self._free and not self.waiting:
            slot = self._free.popleft()
        else:
            waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await _first_of(waiter, CLIENT_EOF.get(), wait_timeout)
            except asyncio.TimeoutError as exc:
                self._abandon(waiter)
                raise AdmissionError(f"no environment slot became free within {wait_timeout} s", code="no_free_slot") from exc
            except asyncio.CancelledError:  # the client left (or the server stops): no ghost in the queue
                self._abandon(waiter)
                raise
            if handed is None:
                self._abandon(waiter)
                raise AdmissionError("no environment slot was free, and the client ended its input while the reset "
                                  "queued: it left the queue", code="no_free_slot")
            slot = handed
        lease = Lease(slot, self.lease_prefix + uuid.uuid4().hex, session, self._clock())
        self._leases[slot] = lease
        self._slot_of[lease.lease_id] = slot
        return lease

    def _abandon(self, waiter: asyncio.Future[int]) -> None:
        """Take a waiter out of the queue; a slot it was handed at the last moment goes to the next one."""
        if waiter.done() and not waiter.cancelled():
            self._hand_over(waiter.result())
        waiter.cancel()
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)

    def _hand_over(self, slot: int) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(slot)
                return
        self._free.append(slot)

    def get(self, slot: object, lease_id: object) -> Lease[T]:
        if isinstance(slot, bool) or not isinstance(slot, int) or not isinstance(lease_id, str):
            raise RequestError("a valid env_idx (int) and lease_id (str) are required", code="invalid_request")
        lease = self._leases.get(slot)
        if lease is None or lease.lease_id != lease_id:
            raise LeaseError(f"stale or invalid lease for environment {slot}")
        lease.last_used = self._clock()
        return lease

    def find(self, lease_id: str) -> Lease[T]:
        """The live lease with this id, wherever it sits (a lease id is unique across slots)."""
        slot = self._slot_of.get(lease_id)
        if slot is None:
            raise LeaseError(f"unknown, released or reclaimed session {lease_id!r}")
        return self.get(slot, lease_id)

    def release(self, slot: object, lease_id: object) -> None:
        lease = self.get(slot, lease_id)
        self._drop(lease.slot)

    def release_all(self) -> None:
        for slot in list(self._leases):
            self._drop(slot)

    def _drop(self, slot: int) -> None:
        lease = self._leases.pop(slot)
        self._slot_of.pop(lease.lease_id, None)
        self._hand_over(slot)

    def reclaim_idle(self) -> int:
        """Free every lease unused for longer than the idle timeout (its client vanished); returns how many."""
        if self.idle_timeout is None:
            return 0
        now = self._clock()
        stale = [slot for slot, lease in self._leases.items() if now - lease.last_used > self.idle_timeout]
        for slot in stale:
            self._drop(slot)
        return len(stale)

"""The keep-alive probe shared by tests/test_server_keepalive.py and benchmarks/bench_keepalive.py: sessions
that step after idle gaps close to the server's keep-alive timeout, counting failed steps and steps the server
executed more than once."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from live_server import serve
from shopsimrl.server import AsyncShopClient, create_app
from shopsimrl.server._protocol import http_protocol


@dataclass
class ProbeResult:
    steps: int = 0
    failed: int = 0
    executed: Counter[str] = field(default_factory=Counter)  # lease id -> steps the server executed
    sent: Counter[str] = field(default_factory=Counter)  # lease id -> steps the client completed
    errors: list[str] = field(default_factory=list)

    @property
    def executed_twice(self) -> int:
        return sum(max(0, self.executed[k] - self.sent[k]) for k in self.executed)


async def _session(url: str, index: int, gaps: tuple[float, float], until: float, out: ProbeResult,
                   retrying: bool) -> None:
    rng = random.Random(index)
    client = AsyncShopClient(url)
    try:
        await client.reset(index % 2)
        lease = client._lease["lease_id"] if client._lease else ""
        while time.monotonic() < until:
            await asyncio.sleep(rng.uniform(*gaps))
            out.steps += 1
            try:
                if retrying:
                    await client.step("search[小吃车]")
                else:  # the previous client: one attempt, no step index
                    response = await client._http.post("/api/shop_agent", json={
                        "action": "interact", **client._lease, "response": "search[小吃车]"})
                    response.raise_for_status()
                out.sent[lease] += 1
            except Exception as exc:  # a failed step is what the probe counts
                out.failed += 1
                out.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                if isinstance(getattr(exc, "__cause__", None), httpx.TimeoutException):
                    break
    finally:
        await client.close()


def run_probe(world: Any, *, sessions: int, seconds: float, gaps: tuple[float, float], keep_alive: float,
              retrying: bool = True) -> ProbeResult:
    """``sessions`` clients step for ``seconds`` against a server closing idle connections after ``keep_alive``."""
    app = create_app(world, slots=sessions)
    service = app.state.service
    out = ProbeResult()
    original = service.step

    def counted(lease: Any, response: object) -> dict[str, Any]:
        result = original(lease, response)
        out.executed[lease.lease_id] += 1
        return result

    service.step = counted
    with serve(app, timeout_keep_alive=keep_alive, http=http_protocol()) as url:
        async def main() -> None:
            until = time.monotonic() + seconds
            await asyncio.gather(*(_session(url, i, gaps, until, out, retrying) for i in range(sessions)))

        asyncio.run(main())
    return out

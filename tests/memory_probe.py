"""Run in a subprocess by test_memory_bound.py: ``n`` distinct maximal searches through ``EnvService``; prints
the resident memory (MB) after a warm-up and at the end, and the cache figures, as one JSON line."""

from __future__ import annotations

import asyncio
import json
import random
import sys


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def maximal_query(terms: list[str], seed: int, chars: int) -> str:
    rng = random.Random(seed)
    parts, size = [], len("search[]")
    while size < chars:
        part = rng.choice(terms) + rng.choice(".-/ ") + rng.choice(terms) + str(rng.randrange(10**6))
        parts.append(part)
        size += len(part) + 1
    return ("search[" + " ".join(parts))[: chars - 1] + "]"


async def main(data: str, n: int, chars: int) -> None:
    from shopsimrl.env.shop_env import ShopWorld
    from shopsimrl.server.service import EnvService

    world = ShopWorld.from_data_dir(data)
    index = world.catalog.search_index
    terms = sorted({t for t in (index.postings.terms if index.postings else ["a"]) if t.isascii() and t.isalnum()})
    service = EnvService(world, slots=1, max_response_chars=chars)
    task = min(world.catalog.goals)
    lease = None
    warm = 0.0
    for i in range(n):
        if lease is None or lease.session.session.done:
            if lease is not None:
                service.release(lease)
            lease, _ = await service.reset(task)
        await service.step_async(lease, maximal_query(terms, i, chars))
        lease.session.reset(task)  # a new episode on the same lease: sessions hold only their current page
        if i == 19:
            warm = rss_mb()
    info = index.cache_info()
    print(json.dumps({"warm_mb": warm, "end_mb": rss_mb(), "cache_bytes": getattr(info, "bytes", -1), "cache_entries": info.currsize}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))

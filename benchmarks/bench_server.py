"""Service benchmark on loopback: steps/s and p50/p99 step latency with 1, 32 and 256 concurrent sessions.

Usage: python benchmarks/bench_server.py [--data DIR] [--steps 20]   (default: the fixture catalog, prepared on demand)
The server runs in its own process (uvicorn); clients are asyncio tasks with httpx in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from shopsimrl.catalog.prepare import PrepareOptions, prepare_dataset


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def session(client: httpx.AsyncClient, task: int, steps: int, latencies: list[float]) -> None:
    reset = (await client.post("/api/shop_agent", json={"action": "reset", "idx": task, "wait_timeout": 120})).json()["result"]
    lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
    actions = ["search[小吃车 关东煮]", "click[back to search]"] * (steps // 2)
    for action in actions:
        t0 = time.perf_counter()
        result = (await client.post("/api/shop_agent", json={"action": "interact", **lease, "response": action})).json()
        latencies.append(time.perf_counter() - t0)
        if result["result"]["done"]:
            break
    await client.post("/api/shop_agent", json={"action": "release_one", **lease})


async def run(base: str, clients: int, steps: int, tasks: list[int]) -> tuple[float, list[float]]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(session(client, tasks[i % len(tasks)], steps, latencies) for i in range(clients)))
        return time.perf_counter() - start, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fixture")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if not (Path(args.data) / "manifest.json").is_file():
        fixture = Path(__file__).resolve().parents[1] / "tests" / "data" / "fixture_catalog.json"
        prepare_dataset(fixture, args.data, options=PrepareOptions(test_size=2, val_size=2))
    port = _port()
    server = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", "serve", "--data", args.data, "--port", str(port),
                               "--slots", "256"])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        ids = []  # the first active task ids (probe with reset/release)
        for task in range(10_000):
            response = httpx.post(f"{base}/api/shop_agent", json={"action": "reset", "idx": task})
            if response.status_code == 200:
                result = response.json()["result"]
                httpx.post(f"{base}/api/shop_agent", json={
                    "action": "release_one", "env_idx": result["env_idx"], "lease_id": result["lease_id"]})
                ids.append(task)
            if len(ids) >= 8:
                break
        for clients in (1, 32, 256):
            elapsed, latencies = asyncio.run(run(base, clients, args.steps, ids))
            latencies.sort()
            p50 = latencies[len(latencies) // 2] * 1e3
            p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1e3
            print(f"{clients:>4} clients: {len(latencies) / elapsed:8.0f} steps/s   p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

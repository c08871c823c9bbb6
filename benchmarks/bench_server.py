"""Service benchmark on loopback: steps/s and p50/p99 step latency with 1, 32 and 256 concurrent sessions,
and server RSS with 1,024 live sessions against one.

Usage: python benchmarks/bench_server.py [--data DIR] [--seconds 5] [--procs 2] [--clients 1,32,256]
(default data: the fixture catalog, prepared on demand).

The server runs in its own process (``shopsimrl serve``: uvicorn, with uvloop/httptools when installed). The
load generator is deliberately light so the figure measures the server, not the client: raw asyncio streams
speaking keep-alive HTTP/1.1, one connection per session, spread over ``--procs`` processes. Each session
holds one lease and loops search → open product → back to search (search results are cached by the engine
after the first pass, as in a long training run). Targets (issue 5): ≥ 1,000 steps/s and p99 ≤ 50 ms with 32
clients (≥ 20× the reference Flask service's ~52 steps/s), RSS(1,024 sessions) / RSS(1 session) ≤ 1.3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from shopsimrl.catalog import PrepareOptions, prepare_dataset

REFERENCE_STEPS_PER_S = 52.0
ACTIONS = ("search[小吃车 关东煮]", "click[824100258497]", "click[back to search]")
FALLBACK_ACTIONS = ("search[冰箱]", "click[back to search]")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Conn:
    """One keep-alive HTTP/1.1 connection; just enough protocol for JSON POSTs to our own server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def post(self, body: dict) -> dict:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.writer.write(b"POST /api/shop_agent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        payload = json.loads(await self.reader.readexactly(length))
        if "error" in payload:
            raise RuntimeError(payload["error"])
        return payload["result"]

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def _session(port: int, task: int, ready: asyncio.Barrier, clock: dict, latencies: list[float]) -> int:
    conn = await Conn.open(port)
    reset = await conn.post({"action": "reset", "idx": task, "wait_timeout": 120})
    lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
    actions = ACTIONS if task == 0 else FALLBACK_ACTIONS
    steps = 0
    if await ready.wait() == 0:  # every session of this process holds its lease; then all processes line up
        await asyncio.get_running_loop().run_in_executor(None, clock["all_ready"].wait)
        clock["stop_at"] = time.perf_counter() + clock["seconds"]  # CLOCK_MONOTONIC: the same in every process
        clock["go"].set()
    await clock["go"].wait()
    stop_at = clock["stop_at"]
    while (now := time.perf_counter()) < stop_at:
        result = await conn.post({"action": "interact", **lease, "response": actions[steps % len(actions)]})
        latencies.append(time.perf_counter() - now)
        steps += 1
        if result["done"]:  # the action limit (30): start the next episode, untimed, as a trainer would
            await conn.post({"action": "release_one", **lease})
            reset = await conn.post({"action": "reset", "idx": task, "wait_timeout": 120})
            lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
    await conn.post({"action": "release_one", **lease})
    await conn.close()
    return steps


def _load_process(port: int, clients: int, tasks: list[int], seconds: float, all_ready, queue) -> None:
    async def main() -> tuple[int, list[float], float]:
        latencies: list[float] = []
        clock: dict = {"seconds": seconds, "all_ready": all_ready, "go": asyncio.Event()}
        ready = asyncio.Barrier(clients)
        sessions = [asyncio.create_task(_session(port, tasks[i % len(tasks)], ready, clock, latencies))
                    for i in range(clients)]
        counts = await asyncio.gather(*sessions)
        return sum(counts), latencies, seconds

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    queue.put(asyncio.run(main()))


def run_level(port: int, clients: int, tasks: list[int], seconds: float, procs: int) -> tuple[float, list[float]]:
    procs = max(1, min(procs, clients))
    queue: mp.Queue = mp.Queue()
    share = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    all_ready = mp.Barrier(procs)
    workers = [mp.Process(target=_load_process, args=(port, n, tasks, seconds, all_ready, queue)) for n in share]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=seconds + 300) for _ in workers]
    for worker in workers:
        worker.join()
    steps = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[1])
    return steps / seconds, latencies


def _tree(pid: int) -> list[int]:
    """The server process and its worker processes (``--workers``)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(child) for child in (task / "children").read_text().split()]
    return pids


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the server (all its processes): a per-step cost that holds on a busy machine."""
    total = 0
    for member in _tree(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    total = 0
    for member in _tree(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


async def _hold_sessions(port: int, count: int, tasks: list[int], pid: int) -> int:
    """RSS of the server while ``count`` sessions are leased (leases outlive connections: one is enough)."""
    conn = await Conn.open(port)
    leases = []
    for i in range(count):  # each session gets real state: a result list, and for task 0 an open product
        task = tasks[i % len(tasks)]
        reset = await conn.post({"action": "reset", "idx": task, "wait_timeout": 60})
        lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
        for action in (ACTIONS if task == 0 else FALLBACK_ACTIONS)[:2]:
            await conn.post({"action": "interact", **lease, "response": action})
        leases.append(lease)
    await asyncio.sleep(0.5)
    rss = rss_kib(pid)
    for lease in leases:
        await conn.post({"action": "release_one", **lease})
    await conn.close()
    return rss


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3 if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fixture")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1), help="load-generator processes")
    parser.add_argument("--clients", default="1,32,256")
    parser.add_argument("--rss-sessions", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=1, help="server worker processes (serve --workers)")
    args = parser.parse_args()
    if not (Path(args.data) / "manifest.json").is_file():
        fixture = Path(__file__).resolve().parents[1] / "tests" / "data" / "fixture_catalog.json"
        prepare_dataset(fixture, args.data, options=PrepareOptions(test_size=2, val_size=2))
    port = _port()
    slots = max(args.rss_sessions, max(int(c) for c in args.clients.split(","))) + 8
    server = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", "serve", "--data", args.data, "--port",
                               str(port), "--slots", str(slots), "--idle-timeout", "0", "--workers", str(args.workers)])
    try:
        for _ in range(1200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)
        tasks = [0]  # task 0 has the product the action mix opens; others (persona and standard) mix in
        try:
            import httptools  # noqa: F401
            import uvloop  # noqa: F401

            stack = "uvicorn + uvloop + httptools"
        except ImportError:
            stack = "uvicorn (asyncio, h11)"
        shape = "one process" if args.workers == 1 else f"front + {args.workers} worker processes"
        print(f"server: {stack}, {shape}, {slots} slots; load: raw keep-alive HTTP/1.1, {args.procs} process(es)")

        asyncio.run(_hold_sessions(port, 1, tasks, server.pid))  # warm the engine (search cache, product pages)
        rss_one = asyncio.run(_hold_sessions(port, 1, tasks, server.pid))
        rss_many = asyncio.run(_hold_sessions(port, args.rss_sessions, [0, 3, 4, 9], server.pid))
        rss_after = rss_kib(server.pid)

        for clients in (int(c) for c in args.clients.split(",")):
            cpu0 = cpu_seconds(server.pid)
            rate, latencies = run_level(port, clients, [0, 0, 3], args.seconds, args.procs)
            per_step = (cpu_seconds(server.pid) - cpu0) / max(1, len(latencies))
            print(f"{clients:>4} clients: {rate:8.0f} steps/s  ({rate / REFERENCE_STEPS_PER_S:5.1f}× reference "
                  f"{REFERENCE_STEPS_PER_S:.0f})   p50 {_pct(latencies, 0.50):6.2f} ms   p99 {_pct(latencies, 0.99):6.2f} ms"
                  f"   server CPU {per_step * 1e6:5.0f} µs/step (≈ {1 / per_step:5.0f} steps/s per free core)")
        print(f"server RSS: 1 session {rss_one / 1024:.1f} MiB, {args.rss_sessions} live sessions "
              f"{rss_many / 1024:.1f} MiB, ratio {rss_many / rss_one:.3f} (target ≤ 1.3); "
              f"after release {rss_after / 1024:.1f} MiB")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

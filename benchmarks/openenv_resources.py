"""The resource figures ``openenv.yaml`` declares (``validation.resources``), measured on ``serve-openenv``.

    .venv-openenv/bin/python benchmarks/openenv_resources.py --data DIR [--limit 100] [--sessions 8]

Starts ``shopsimrl serve-openenv`` in its own process, plays the heuristic over OpenEnv's WebSocket on the first
``--limit`` test tasks with ``--sessions`` sessions at once, and prints one JSON object: the server's peak RSS
(``VmHWM``), the cores it used (CPU seconds / wall seconds), the longest episode's wall time, and the disk the
data directory takes. The manifest declares these with headroom (docs/integrations.md#openenv-validation).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openenv_parity import over_openenv
from shopsimrl.agent.policies import make_policy
from shopsimrl.env import ShopWorld
from shopsimrl.versions import EPISODE_LIMITS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("serve-openenv exited before it was ready")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("serve-openenv was not ready in time")


async def _play(url: str, world: ShopWorld, tasks: list[int], sessions: int) -> list[float]:
    policy = make_policy("heuristic", world)
    gate = asyncio.Semaphore(sessions)
    limit = EPISODE_LIMITS["single_turn"]

    async def one(task_id: int) -> float:
        async with gate:
            started = time.perf_counter()
            await over_openenv(url, policy, task_id, None, limit)
            return time.perf_counter() - started

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def _disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="prepared data directory to serve")
    parser.add_argument("--limit", type=int, default=100, help="test tasks to play (default: 100)")
    parser.add_argument("--sessions", type=int, default=8, help="concurrent sessions (default: 8)")
    args = parser.parse_args()
    world = ShopWorld.shared(args.data)
    tasks = list(world.catalog.split("test"))[: args.limit]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "shopsimrl.cli", "serve-openenv", "--data", args.data, "--port", str(port),
               "--slots", str(args.sessions)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(url, proc)
        cpu0, wall0 = _cpu_seconds(proc.pid), time.monotonic()
        durations = asyncio.run(_play(url, world, tasks, args.sessions))
        cpu, wall = _cpu_seconds(proc.pid) - cpu0, time.monotonic() - wall0
        peak_kb = _status_kb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(json.dumps({
        "episodes": len(durations), "sessions": args.sessions, "server_peak_rss_mb": round(peak_kb / 1024, 1),
        "server_cores_used": round(cpu / wall, 2), "episode_wall_s_max": round(max(durations), 3),
        "episode_wall_s_mean": round(sum(durations) / len(durations), 3),
        "data_dir_mb": round(_disk_mb(Path(args.data)), 1),
    }, indent=2))


if __name__ == "__main__":
    main()

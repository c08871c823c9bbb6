"""The audit's long-running checks (issue 43 item 6), each against the real server command in its own process:

* ``soak``: episodes over ``/v1`` from concurrent clients, a share abandoned mid-episode (no release, the
  connection dropped); counts 5xx answers and transport errors, checks every slot comes back through idle
  reclaim, and reports the server's RSS and open file descriptors before and after (``serve``, and
  ``serve --workers 2`` with ``--workers 2``).
* ``slowloris``: connections that send a request's headers one byte a second; reports when the server closed
  them (against ``--header-timeout``), ``/healthz`` latency meanwhile and the descriptors after.
* ``openenv``: one OpenEnv episode over OpenEnv's own client held longer than every timeout of the server
  (header, body; idle gaps between steps longer than both), a second raw session alternating malformed and valid
  steps, then an idle socket's reclaim and its close code. Needs the ``openenv`` extra (``.venv-openenv``).

    PYTHONPATH=src python benchmarks/bench_reliability.py [soak] [slowloris] [openenv]   # default: all
    PYTHONPATH=src python benchmarks/bench_reliability.py soak [--episodes 2000] [--workers 2]
    PYTHONPATH=src python benchmarks/bench_reliability.py slowloris [--connections 200]
    .venv-openenv/bin/python benchmarks/bench_reliability.py openenv [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["小吃车 关东煮", "冰箱", "睫毛膏 防水", "枕头", "降噪 耳机", "红色", "x" * 300]


def _fixture_data() -> Path:
    from shopsimrl.catalog import PrepareOptions, prepare_dataset

    data = Path(tempfile.mkdtemp()) / "fixture"
    prepare_dataset(ROOT / "tests" / "data" / "fixture_catalog.json", data, options=PrepareOptions(test_size=2, val_size=2))
    return data


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(command: str, data: Path, *options: str, health: str = "/healthz") -> Iterator[tuple[str, int]]:
    port = _port()
    process = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", command, "--data", str(data),
                                "--port", str(port), *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + health, timeout=2).status_code == 200:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{command} did not start")
        time.sleep(0.1)
    try:
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def _tree(pid: int) -> list[int]:
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += _tree(int(child))
    return found


def _rss_mib(pid: int) -> float:
    total = 0
    for member in _tree(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _fds(pid: int) -> int:
    return sum(len(os.listdir(f"/proc/{member}/fd")) for member in _tree(pid))


# ---------------------------------------------------------------------------------------------------- soak
async def _episode(url: str, task: int, rng: random.Random, abandon: bool, tally: dict[str, int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:  # its own connection: dropped if abandoned
        try:
            created = await http.post("/v1/sessions", json={"task_id": task, "wait_timeout": 60.0})
            tally["5xx"] += created.status_code >= 500
            if created.status_code != 201:
                tally["refused"] += 1
                return
            session = created.json()["session_id"]
            for _ in range(rng.randint(1, 6)):
                step = await http.post(f"/v1/sessions/{session}/step", json={"action": f"search[{rng.choice(QUERIES)}]"})
                tally["5xx"] += step.status_code >= 500
                tally["steps"] += 1
            if abandon:
                tally["abandoned"] += 1
                return  # no release: the idle timeout must reclaim the slot
            ended = await http.post(f"/v1/sessions/{session}/terminate", json={"reason": "action_limit"})
            released = await http.delete(f"/v1/sessions/{session}")
            tally["5xx"] += (ended.status_code >= 500) + (released.status_code >= 500)
            tally["completed"] += 1
        except httpx.TransportError:
            tally["transport_errors"] += 1


async def _soak_run(url: str, tasks: list[int], episodes: int, concurrency: int, share: float) -> dict[str, int]:
    rng = random.Random(20261207)
    tally = dict.fromkeys(("completed", "abandoned", "refused", "steps", "5xx", "transport_errors"), 0)
    plan = [(rng.choice(tasks), rng.random() < share) for _ in range(episodes)]
    gate = asyncio.Semaphore(concurrency)

    async def one(task: int, abandon: bool) -> None:
        async with gate:
            await _episode(url, task, random.Random(rng.random()), abandon, tally)

    await asyncio.gather(*(one(task, abandon) for task, abandon in plan))
    return tally


def soak(args: argparse.Namespace, data: Path) -> None:
    from shopsimrl.env import ShopWorld

    tasks = sorted(ShopWorld.from_data_dir(data).catalog.goals)
    options = ["--slots", str(args.slots), "--idle-timeout", str(args.idle_timeout)]
    if args.workers > 1:
        options += ["--workers", str(args.workers)]
    with _server("serve", data, *options) as (url, pid):
        rss0, fds0 = _rss_mib(pid), _fds(pid)
        begin = time.monotonic()
        tally = asyncio.run(_soak_run(url, tasks, args.episodes, args.concurrency, args.abandon))
        elapsed = time.monotonic() - begin
        time.sleep(args.idle_timeout + 2)  # every abandoned lease is past its idle timeout
        httpx.post(url + "/api/shop_agent", json={"action": "reset", "idx": 0, "wait_timeout": 5})  # reclaims run
        httpx.post(url + "/api/shop_agent", json={"action": "release_all"})
        health = httpx.get(url + "/healthz").json()
        rss1, fds1 = _rss_mib(pid), _fds(pid)
    print(json.dumps({"check": "soak", "workers": args.workers, "episodes": args.episodes, **tally,
                      "seconds": round(elapsed, 1), "free_slots_after": health["free_slots"], "slots": args.slots,
                      "live_sessions_after": health["live_sessions"], "rss_mib": [round(rss0, 1), round(rss1, 1)],
                      "fds": [fds0, fds1]}))


# ---------------------------------------------------------------------------------------------------- slowloris
def slowloris(args: argparse.Namespace, data: Path) -> None:
    with _server("serve", data, "--header-timeout", str(args.header_timeout)) as (url, pid):
        fds0 = _fds(pid)
        port = int(url.rsplit(":", 1)[1])
        sockets, opened = [], time.monotonic()
        for _ in range(args.connections):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            sockets.append(sock)
        time.sleep(0.5)
        fds_during = _fds(pid)  # every slow connection accepted
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
        closed_after: dict[int, float] = {}
        latencies: list[float] = []
        with httpx.Client(base_url=url) as http:
            for second in range(int(args.header_timeout * 3)):
                for index, sock in enumerate(sockets):
                    if index in closed_after:
                        continue
                    try:
                        sock.send(request[second:second + 1])
                        if sock.recv(1) == b"":
                            closed_after[index] = time.monotonic() - opened
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed_after[index] = time.monotonic() - opened
                start = time.perf_counter()
                http.get("/healthz")
                latencies.append((time.perf_counter() - start) * 1000)
                if len(closed_after) == len(sockets):
                    break
                time.sleep(1.0)
        for sock in sockets:
            sock.close()
        time.sleep(1.0)
        fds1 = _fds(pid)
    times = sorted(closed_after.values())
    print(json.dumps({"check": "slowloris", "connections": args.connections, "header_timeout_s": args.header_timeout,
                      "closed": len(times), "closed_after_s": [round(times[0], 1), round(statistics.median(times), 1),
                                                               round(times[-1], 1)] if times else None,
                      "healthz_ms_p50_max": [round(statistics.median(latencies), 1), round(max(latencies), 1)],
                      "fds_before_during_after": [fds0, fds_during, fds1]}))


# ---------------------------------------------------------------------------------------------------- openenv
def openenv_session(args: argparse.Namespace, data: Path) -> None:
    from shopsimrl.env import ShopWorld
    from shopsimrl.openenv import ShopSimAction, ShopSimClient

    task = min(ShopWorld.from_data_dir(data).catalog.goals)
    header, body, idle, gap = 2.0, 3.0, 8.0, 4.0  # gaps between steps outlast the header and body timeouts
    options = ["--header-timeout", str(header), "--body-timeout", str(body), "--idle-timeout", str(idle)]
    with _server("serve-openenv", data, *options, health="/health") as (url, _):
        async def official() -> tuple[int, float, str | None]:
            steps, begin = 0, time.monotonic()
            try:
                async with ShopSimClient(base_url=url, message_timeout_s=60) as client:
                    await client.reset(task_id=task)
                    while time.monotonic() - begin < args.seconds:
                        await asyncio.sleep(gap)
                        await client.step(ShopSimAction(tool="search", arguments={"query": random.choice(QUERIES)}))
                        steps += 1
                    state = await client.state()
                    failure = None if state.step_count == steps else "the session was replaced"
            except Exception as exc:  # what the session ended with, reported as the figure
                failure = f"{type(exc).__name__}: {exc}"[:160]
            return steps, time.monotonic() - begin, failure

        steps, held, failure = asyncio.run(official())
        raw = _raw_session(url, task, args.malformed_rounds, idle)
    print(json.dumps({"check": "openenv", "header_timeout_s": header, "body_timeout_s": body, "idle_timeout_s": idle,
                      "step_gap_s": gap, "held_s": round(held, 1), "steps": steps, "session_failure": failure,
                      "malformed_sent": args.malformed_rounds, **raw}))


MALFORMED_STEPS = [{"tool": "rm"}, {"tool": ""}, {"tool": 5}, {"tool": "search", "arguments": {"query": 5}},
                   {"tool": "search", "arguments": "q"}, {"tool": "search", "arguments": {"query": "x"}, "extra": 1},
                   "[" * 1000 + "]" * 1000]


def _raw_session(url: str, task: int, rounds: int, idle: float) -> dict[str, Any]:
    """Malformed steps, each followed by a valid one, in one session; then silence until the idle reclaim."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    figures: dict[str, Any] = {"malformed_answered_typed": 0, "valid_steps_after_each": 0}

    def call(raw: Any, message: Any) -> dict[str, Any]:
        raw.send(message if isinstance(message, str) else json.dumps(message))
        answer: dict[str, Any] = json.loads(raw.recv(timeout=30))
        return answer

    try:
        with connect(url.replace("http", "ws") + "/ws", open_timeout=10) as raw:
            call(raw, {"type": "reset", "data": {"task_id": task}})
            for round_ in range(rounds):
                bad = MALFORMED_STEPS[round_ % len(MALFORMED_STEPS)]
                answer = call(raw, bad if isinstance(bad, str) else {"type": "step", "data": bad})
                typed = answer["type"] == "error" and answer["data"].get("code") != "SESSION_ERROR"
                figures["malformed_answered_typed"] += typed
                played = call(raw, {"type": "step", "data": {"tool": "search", "arguments": {"query": "红色"}}})
                figures["valid_steps_after_each"] += played["type"] == "observation"
                if played["type"] == "observation" and played["data"]["done"]:
                    call(raw, {"type": "reset", "data": {"task_id": task}})  # the action limit: a new episode
            quiet = time.monotonic()
            try:
                raw.recv(timeout=idle * 3)
            except ConnectionClosed as closed:
                figures["idle_close_code"] = closed.rcvd.code if closed.rcvd else None
            figures["idle_reclaimed_after_s"] = round(time.monotonic() - quiet, 1)
    except Exception as exc:  # the session ended early: that is the figure
        figures["raw_session_failure"] = f"{type(exc).__name__}: {exc}"[:160]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checks", nargs="*", metavar="CHECK",
                        help="soak, slowloris, openenv (default: all; openenv only where the extra is installed)")
    parser.add_argument("--data", help="a prepared data directory (default: the test fixture catalog)")
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--abandon", type=float, default=0.3, help="share of episodes abandoned mid-way")
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--idle-timeout", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the OpenEnv episode is held")
    parser.add_argument("--malformed-rounds", type=int, default=70)
    args = parser.parse_args(argv)
    runs = {"soak": soak, "slowloris": slowloris, "openenv": openenv_session}
    unknown = sorted(set(args.checks) - set(runs))
    if unknown:
        parser.error(f"unknown check {', '.join(unknown)}: choose from {', '.join(runs)}")
    checks = args.checks or [name for name in runs if name != "openenv" or importlib.util.find_spec("openenv")]
    data = Path(args.data) if args.data else _fixture_data()
    for name in checks:
        runs[name](args, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

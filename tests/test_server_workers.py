"""``shopsimrl serve --workers 2``: a front process routes every request to the worker holding its lease."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from live_server import serve_command
from shopsimrl.env import ShopWorld
from shopsimrl.server import AsyncShopClient

QUERIES = ["小吃车 关东煮", "冰箱", "睫毛膏 防水", "枕头", "降噪 耳机"]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


@pytest.fixture(scope="module")
def front(prepared_dir):
    port = _port()
    with serve_command(["serve", "--data", str(prepared_dir), "--port", str(port), "--workers", "2", "--slots", "6",
                        "--wait-timeout", "30"], port=port) as process:
        yield f"http://127.0.0.1:{port}", process


def test_health_adds_up_the_workers(front):
    base, _ = front
    health = httpx.get(f"{base}/healthz").json()
    assert health["workers"] == 2 and health["environment_slots"] == 6 and health["free_slots"] == 6


def test_sessions_on_both_workers_match_in_process_replay(front, prepared_dir):
    base, _ = front
    world = ShopWorld.from_data_dir(prepared_dir)
    tasks = sorted(world.catalog.goals)

    async def session(i: int) -> tuple[int, int, list[str], list[dict]]:
        rng = random.Random(i)
        async with AsyncShopClient(base, timeout=60) as client:
            results = [await client.reset(tasks[i % len(tasks)], persona=None if i % 2 == 0 else False, wait_timeout=60)]
            slot = client._lease["env_idx"]
            actions: list[str] = []
            for _ in range(6):
                state = results[-1]["observation_state"]
                if state["search_available"]:
                    action = f"search[{rng.choice(QUERIES)}]"
                elif state["actions"] and rng.random() < 0.8:
                    action = f"click[{rng.choice(state['actions'])}]"
                else:
                    action = "Thought: 返回。\\nAction: click[back to search]"
                actions.append(action)
                results.append(await client.step(action))
                if results[-1]["done"]:
                    break
        return i, slot, actions, results

    async def run() -> list:
        return await asyncio.gather(*(session(i) for i in range(24)))

    outcomes = asyncio.run(run())
    slots = {slot for _, slot, _, _ in outcomes}
    assert slots & {0, 1, 2} and slots & {3, 4, 5}  # both workers served sessions (6 slots, 24 clients queued)
    for i, _, actions, remote in outcomes:
        local = world.new_env()
        expected = [local.reset(tasks[i % len(tasks)], persona=None if i % 2 == 0 else False)]
        expected += [local.step(action) for action in actions]  # model text is read alike on both
        for index, (got, want) in enumerate(zip(remote, expected, strict=True)):
            got, want = dict(got), dict(want)
            if index:
                got.pop("idx"), want.pop("idx")
            assert got == want
    assert httpx.get(f"{base}/healthz").json()["free_slots"] == 6


def test_routing_by_slot_and_by_session_id(front):
    base, _ = front
    with httpx.Client(base_url=base, timeout=30) as http:
        leases = [http.post("/api/shop_agent", json={"action": "reset", "idx": 0}).json()["result"] for _ in range(4)]
        assert {lease["lease_id"][:2] for lease in leases} == {"00", "01"}  # the prefix names the worker
        for lease in leases:
            worker = int(lease["lease_id"][:2], 16)
            assert (lease["env_idx"] >= 3) == (worker == 1)
            step = http.post("/api/shop_agent", json={"action": "interact", "env_idx": lease["env_idx"],
                                                      "lease_id": lease["lease_id"], "response": "search[冰箱]"})
            assert step.status_code == 200 and step.json()["result"]["idx"] == f"slot-{lease['env_idx']}-0"
            v1 = http.get(f"/v1/sessions/{lease['lease_id']}")
            assert v1.status_code == 200 and v1.json()["env_idx"] == lease["env_idx"]
        stale = http.post("/api/shop_agent", json={"action": "interact", "env_idx": leases[0]["env_idx"],
                                                   "lease_id": leases[1]["lease_id"], "response": "x"})
        assert stale.status_code == 409
        wrong = http.post("/api/shop_agent", json={"action": "interact", "env_idx": 99, "lease_id": "00ab",
                                                   "response": "x"})
        assert wrong.status_code == 409 and "stale or invalid lease for environment 99" in wrong.json()["error"]
        assert http.post("/api/shop_agent", content=b"{oops", headers={"content-type": "application/json"}).status_code == 400
        assert http.post("/api/shop_agent", content=b"{oops").status_code == 415  # the front checks it too
        created = http.post("/v1/sessions", json={"task_id": 3})
        assert created.status_code == 201
        assert http.delete(f"/v1/sessions/{created.json()['session_id']}").status_code == 200
        assert http.get("/healthz").json()["live_sessions"] == 4
        assert http.post("/api/shop_agent", json={"action": "release_all"}).status_code == 200
        assert http.get("/healthz").json()["free_slots"] == 6  # release_all reached every worker
        assert "Agent View" in http.get("/debug-ui").text and http.get("/openapi.json").status_code == 200


def test_stopping_the_front_stops_the_workers(front):
    _, process = front
    workers = _children(process.pid)
    assert len(workers) >= 2
    process.terminate()
    assert process.wait(timeout=20) == 0
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in workers)


# ---------------------------------------------------------------- issue 13 item 4: HEAD floods and shutdown


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_head_requests_are_answered_without_leaking_and_sigterm_still_stops(prepared_dir):
    """HEAD through the front gets its headers (no body awaited), fds stay flat, and SIGTERM ends it all."""
    port = _port()
    process = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", "serve", "--data", str(prepared_dir), "--port",
                                str(port), "--workers", "2", "--slots", "2"])
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve --workers did not start"
            time.sleep(0.1)
        workers = _children(process.pid)
        get = httpx.get(f"{base}/v1/tasks", timeout=5)
        with httpx.Client(base_url=base, timeout=5) as http:  # warm the front's worker connections
            for _ in range(3):
                http.head("/v1/tasks")
        before = [_fd_count(pid) for pid in (process.pid, *workers)]
        for _ in range(60):  # each on its own connection, as a scanner would send them
            head = httpx.head(f"{base}/v1/tasks", timeout=5)
            assert head.status_code == 200 and head.content == b""
            assert head.headers["content-length"] == get.headers["content-length"]
        time.sleep(0.5)
        after = [_fd_count(pid) for pid in (process.pid, *workers)]
        assert all(a <= b + 4 for a, b in zip(after, before, strict=True)), (before, after)
        process.terminate()
        assert process.wait(timeout=20) is not None
        time.sleep(0.5)
        assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()
                    and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

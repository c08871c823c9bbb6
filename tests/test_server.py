"""The HTTP service over a real uvicorn server on loopback (issue 5: API contract, errors, leases)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn

from shopsimrl.env.shop_env import ShopWorld
from shopsimrl.server import LeasePool, PoolTimeout, create_app
from shopsimrl.server.leases import LeaseError

QUERY = "可移动小吃车 煤气灶 三个锅"
OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def base_url(prepared_dir):
    world = ShopWorld.from_data_dir(prepared_dir)
    port = _free_port()
    config = uvicorn.Config(create_app(world, slots=4, reset_wait_timeout=1.0), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=5)


def _post(client, payload, status=200):
    response = client.post("/api/shop_agent", json=payload)
    assert response.status_code == status, response.text
    return response.json()


def test_full_episode_over_http(base_url):
    with httpx.Client(base_url=base_url) as client:
        reset = _post(client, {"action": "reset", "idx": 0, "if_persona": True})["result"]
        assert reset["observation"].startswith("页面：搜索首页") and "instruction" not in reset
        lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
        step = _post(client, {"action": "interact", **lease, "response": f"Thought: 先搜索。\\nAction: search[{QUERY}]"})
        assert step["result"]["action_feedback"]["reason"] == "executed"
        assert step["result"]["idx"] == f"slot-{lease['env_idx']}-0"
        _post(client, {"action": "interact", **lease, "response": "click[824100258497]"})
        _post(client, {"action": "interact", **lease, "response": f"click[{OPTION}]"})
        done = _post(client, {"action": "interact", **lease, "response": "click[buy now]"})["result"]
        assert done["done"] and done["over"] and done["reward"] == 1.0 and done["goal"]["asin"] == "824100258497"
        after = _post(client, {"action": "interact", **lease, "response": "click[buy now]"}, status=409)
        assert "already terminated" in after["error"]
        assert _post(client, {"action": "release_one", **lease})["result"]["message"].endswith("has been released")
        assert "stale or invalid lease" in _post(client, {"action": "interact", **lease, "response": "x"}, status=409)["error"]
        health = client.get("/healthz").json()
        assert health["primary_reward"] == "r_strict" and health["free_slots"] == 4


@pytest.mark.parametrize(("payload", "status", "fragment"), [
    ({"action": "dance"}, 400, "unsupported action"),
    ({"action": "reset"}, 400, "requires idx"),
    ({"action": "reset", "idx": "3"}, 400, "must be an integer"),
    ({"action": "reset", "idx": 6}, 404, "unknown or inactive task_id 6"),
    ({"action": "reset", "idx": 0, "env_idx": 1}, 400, "must not include env_idx"),
    ({"action": "reset", "idx": 0, "interaction_mode": "chat"}, 400, "unsupported interaction_mode"),
    ({"action": "interact", "env_idx": True, "lease_id": "x"}, 400, "valid env_idx and lease_id"),
    ({"action": "interact", "env_idx": 0, "lease_id": "nope", "response": "x"}, 409, "stale or invalid lease"),
])
def test_client_mistakes_are_4xx(base_url, payload, status, fragment):
    with httpx.Client(base_url=base_url) as client:
        assert fragment in _post(client, payload, status=status)["error"]


def test_non_json_body_is_400(base_url):
    response = httpx.post(f"{base_url}/api/shop_agent", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "JSON object" in response.json()["error"]


def test_terminate_and_bad_reason(base_url):
    with httpx.Client(base_url=base_url) as client:
        reset = _post(client, {"action": "reset", "idx": 3})["result"]
        lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
        assert "unsupported termination reason" in _post(
            client, {"action": "terminate", **lease, "termination_reason": "finish"}, status=400)["error"]
        result = _post(client, {"action": "terminate", **lease, "termination_reason": "generation_length"})["result"]
        assert result["done"] and result["message"] == "Episode terminated: generation_length"
        assert result["observation_state"]["page_type"] == "terminal"
        _post(client, {"action": "release_one", **lease})


def test_concurrent_sessions_do_not_cross_talk(base_url, prepared_dir):
    world = ShopWorld.from_data_dir(prepared_dir)

    def episode(task: int) -> tuple[list, list]:
        actions = [f"search[{QUERY} {task}]", "click[next >]", "click[824100258497]", "click[x]"]
        with httpx.Client(base_url=base_url, timeout=30) as client:
            reset = _post(client, {"action": "reset", "idx": task, "wait_timeout": 30})["result"]
            lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
            remote = [_post(client, {"action": "interact", **lease, "response": a})["result"]["observation"] for a in actions]
            _post(client, {"action": "release_one", **lease})
        local_env = world.new_env()
        local_env.reset(task, persona=False)
        local = [local_env.step(a)["observation"] for a in actions]
        return remote, local

    tasks = [0, 3, 4, 9, 11, 13, 14, 1] * 2
    with ThreadPoolExecutor(max_workers=16) as executor:
        for remote, local in executor.map(episode, tasks):
            assert remote == local


def test_pool_is_fifo_times_out_and_reclaims_idle():
    async def scenario() -> None:
        now = [0.0]
        pool: LeasePool[str] = LeasePool(1, idle_timeout=10, clock=lambda: now[0])
        first = await pool.acquire("a")
        order: list[str] = []

        async def wait(name: str) -> None:
            lease = await pool.acquire(name, wait_timeout=5)
            order.append(name)
            pool.release(lease.slot, lease.lease_id)

        waiters = [asyncio.create_task(wait(n)) for n in ("b", "c")]
        await asyncio.sleep(0.01)
        assert pool.waiting == 2
        pool.release(first.slot, first.lease_id)
        await asyncio.gather(*waiters)
        assert order == ["b", "c"]
        held = await pool.acquire("d")
        with pytest.raises(PoolTimeout):
            await pool.acquire("e", wait_timeout=0.05)
        with pytest.raises(LeaseError):
            pool.release(held.slot, "stale")
        now[0] = 11.0
        assert pool.reclaim_idle() == 1 and pool.free_slots == 1

    asyncio.run(scenario())


def test_sync_client_matches_in_process_env_and_releases(base_url, prepared_dir):
    from shopsimrl.server import ServiceError, ShopClient

    actions = [f"search[{QUERY}]", "click[824100258497]", f"click[{OPTION}]", "click[buy now]"]
    local = ShopWorld.from_data_dir(prepared_dir).new_env()
    expected = [local.reset(0)] + [local.step(a) for a in actions]
    with ShopClient(base_url) as client:
        got = [client.reset(0)]
        assert client.tools()[0]["function"]["name"] == "search"
        got += [client.step(a) for a in actions]
        assert client.done
        with pytest.raises(ServiceError, match="HTTP 409"):
            client.step("click[buy now]")
    for remote, mine in zip(got, expected, strict=True):
        remote.pop("idx"), mine.pop("idx")
        assert remote == mine
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4


def test_async_client(base_url):
    from shopsimrl.server import AsyncShopClient

    async def run() -> dict:
        async with AsyncShopClient(base_url) as client:
            await client.reset(3, persona=True)
            await client.step("search[宿舍 冰箱]")
            return await client.terminate("action_limit")

    result = asyncio.run(run())
    assert result["termination_reason"] == "action_limit" and "lease_id" not in result
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4

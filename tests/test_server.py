"""The HTTP service over a real uvicorn server on loopback (issue 5: API contract, errors, leases, clients)."""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from live_server import DroppingProxy, serve
from shopsimrl.env import ShopWorld
from shopsimrl.errors import AdmissionError, EpisodeStateError, LeaseError, ServiceError
from shopsimrl.server import AsyncShopClient, LeasePool, ShopClient, create_app

QUERY = "可移动小吃车 煤气灶 三个锅"
OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_url(world):
    with serve(create_app(world, slots=4, reset_wait_timeout=1.0)) as url:
        yield url


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
        _post(client, {"action": "interact", **lease, "response": "search[枕头]"})
        result = _post(client, {"action": "terminate", **lease, "termination_reason": "generation_length"})["result"]
        assert result["done"] and result["message"] == "Episode terminated: generation_length"
        assert "action_feedback" not in result  # the reference's terminate result has none (issue 13 item 10)
        assert result["observation_state"]["page_type"] == "terminal"
        _post(client, {"action": "release_one", **lease})


def test_concurrent_sessions_do_not_cross_talk(base_url, world):
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
        with raises_kind(AdmissionError, "no_free_slot"):
            await pool.acquire("e", wait_timeout=0.05)
        with pytest.raises(LeaseError):
            pool.release(held.slot, "stale")
        now[0] = 11.0
        assert pool.reclaim_idle() == 1 and pool.free_slots == 1

    asyncio.run(scenario())


def test_sync_client_matches_in_process_env_and_releases(base_url, world):
    actions = [f"search[{QUERY}]", "click[824100258497]", f"click[{OPTION}]", "click[buy now]"]
    local = world.new_env()
    expected = [local.reset(0)] + [local.step(a) for a in actions]
    with ShopClient(base_url) as client:
        got = [client.reset(0)]
        assert client.tools()[0]["function"]["name"] == "search"
        got += [client.step(a) for a in actions]
        assert client.done
        with raises_kind(EpisodeStateError, "episode_terminated", match="already terminated"):  # as ShopEnv, not a status
            client.step("click[buy now]")
    for remote, mine in zip(got, expected, strict=True):
        remote.pop("idx"), mine.pop("idx")
        assert remote == mine
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4


def test_async_client(base_url):
    async def run() -> dict:
        async with AsyncShopClient(base_url) as client:
            await client.reset(3, persona=True)
            await client.step("search[宿舍 冰箱]")
            return await client.terminate("action_limit")

    result = asyncio.run(run())
    assert result["termination_reason"] == "action_limit" and "lease_id" not in result
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4


# --------------------------------------------------------------------------------------------- 64 clients
QUERIES = ["小吃车 关东煮", "冰箱", "睫毛膏 防水", "枕头", "降噪 耳机", "连衣裙", "T恤", "煤气灶 三个锅"]
ODD_ACTIONS = ["click[nothing here]", "search[]", "Thought: 返回。\\nAction: click[back to search]", "buy", "click[< prev]"]


def _choose(rng: random.Random, result: dict) -> str:
    """A random policy that reads its own session's page: a cross-talk would make it act on another page."""
    state = result["observation_state"]
    if state.get("search_available") and rng.random() < 0.85:
        return f"search[{rng.choice(QUERIES)}]"
    actions = state.get("actions") or []
    if actions and rng.random() < 0.85:
        return f"click[{rng.choice(actions)}]"
    return rng.choice(ODD_ACTIONS)


def test_64_concurrent_clients_match_in_process_replay(world):
    """64 async clients at once over 24 slots (so resets also queue): every response of every session equals
    an in-process ShopEnv replay of that session's own actions."""
    tasks = sorted(world.catalog.goals)
    modes = ["single_turn", "multi_turn"]

    async def client_session(i: int, base: str) -> tuple[dict, list[str], list[dict]]:
        rng = random.Random(1000 + i)
        setup = {"task_id": tasks[i % len(tasks)], "persona": None if i % 2 == 0 else False, "interaction_mode": modes[i % 3 == 0]}
        async with AsyncShopClient(base, timeout=60) as client:
            results = [await client.reset(**setup, wait_timeout=60)]
            actions: list[str] = []
            for _ in range(rng.randint(3, 12)):
                action = _choose(rng, results[-1])
                actions.append(action)
                results.append(await client.step(action))
                if results[-1]["done"]:
                    break
                await asyncio.sleep(0)
            if not results[-1]["done"] and rng.random() < 0.5:
                actions.append("<terminate>")
                results.append(await client.terminate(rng.choice(["action_limit", "generation_length"])))
        return setup, actions, results

    async def run_all(base: str) -> list:
        return await asyncio.gather(*(client_session(i, base) for i in range(64)))

    with serve(create_app(world, slots=24)) as base:
        sessions = asyncio.run(run_all(base))
        assert httpx.get(f"{base}/healthz").json()["free_slots"] == 24  # every context exit released its lease

    compared = 0
    for setup, actions, remote in sessions:
        local = world.new_env()
        expected = [local.reset(setup["task_id"], persona=setup["persona"], interaction_mode=setup["interaction_mode"])]
        for action in actions:
            if action == "<terminate>":
                reason = remote[len(expected)]["termination_reason"]
                expected.append(local.terminate(reason))  # the in-process result is the reference's shape too
            else:
                expected.append(local.step(action))  # ShopEnv reads model text as the service does
        assert len(remote) == len(expected)
        for index, (got, want) in enumerate(zip(remote, expected, strict=True)):
            got, want = dict(got), dict(want)
            if index:  # step results name the server's slot in the session string
                assert got.pop("idx").endswith(f"-{setup['task_id']}") and want.pop("idx")
            assert got == want
            compared += 1
    assert compared > 64 * 3


# --------------------------------------------------------------------------------------------- leases over HTTP
def test_reference_wait_timeout_has_the_v1_bound(base_url):
    with httpx.Client(base_url=base_url) as client:
        for bad in (86_400.5, 1e308, -1):
            error = _post(client, {"action": "reset", "idx": 0, "wait_timeout": bad}, status=400)["error"]
            assert "wait_timeout must be a number of seconds between 0 and 86400" in error
        assert client.get("/healthz").json()["free_slots"] == 4


def test_reset_wait_timeout_is_503_over_http(base_url):
    with httpx.Client(base_url=base_url) as client:
        held = [_post(client, {"action": "reset", "idx": 0})["result"] for _ in range(4)]
        assert client.get("/healthz").json()["free_slots"] == 0
        t0 = time.monotonic()
        error = _post(client, {"action": "reset", "idx": 0, "wait_timeout": 0.2}, status=503)["error"]
        assert "no environment slot became free within 0.2 s" in error and time.monotonic() - t0 >= 0.2
        for result in held:
            _post(client, {"action": "release_one", "env_idx": result["env_idx"], "lease_id": result["lease_id"]})
        assert client.get("/healthz").json()["free_slots"] == 4


def test_queued_resets_are_served_in_fifo_order_over_http(world):
    async def scenario(base: str) -> list[str]:
        order: list[str] = []
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            async def reset(name: str) -> dict:
                response = await http.post("/api/shop_agent", json={"action": "reset", "idx": 0, "wait_timeout": 20})
                order.append(name)
                return response.json()["result"]

            async def release(result: dict) -> None:
                await http.post("/api/shop_agent", json={
                    "action": "release_one", "env_idx": result["env_idx"], "lease_id": result["lease_id"]})

            first = await reset("first")
            waiting = []
            for name in ("b", "c", "d"):  # queue them one after another, so their arrival order is known
                waiting.append(asyncio.create_task(reset(name)))
                while (await http.get("/healthz")).json()["waiting_resets"] < len(waiting):
                    await asyncio.sleep(0.01)
            await release(first)
            for task in waiting:
                await release(await task)
        return order

    with serve(create_app(world, slots=1)) as base:
        assert asyncio.run(scenario(base)) == ["first", "b", "c", "d"]


def test_idle_lease_is_reclaimed_and_then_stale_over_http(world):
    with serve(create_app(world, slots=1, idle_timeout=0.2, reset_wait_timeout=5)) as base, \
            httpx.Client(base_url=base) as client:
        vanished = _post(client, {"action": "reset", "idx": 3})["result"]  # its client "dies" without releasing
        time.sleep(0.3)
        fresh = _post(client, {"action": "reset", "idx": 4})["result"]  # the only slot is reclaimed for it
        assert fresh["env_idx"] == vanished["env_idx"] and fresh["lease_id"] != vanished["lease_id"]
        stale = {"env_idx": vanished["env_idx"], "lease_id": vanished["lease_id"]}
        error = _post(client, {"action": "interact", **stale, "response": "search[冰箱]"}, status=409)["error"]
        assert error == f"stale or invalid lease for environment {vanished['env_idx']}"
        assert _post(client, {"action": "interact", "env_idx": fresh["env_idx"], "lease_id": fresh["lease_id"],
                              "response": "search[冰箱]"})["result"]["action_feedback"]["valid"]


# --------------------------------------------------------------------------------------------- client
def test_client_retries_connection_errors_only_on_idempotent_calls(base_url):
    port = int(base_url.rsplit(":", 1)[1])
    proxy = DroppingProxy(port)
    try:
        client = ShopClient(f"http://127.0.0.1:{proxy.port}")
        client.reset(0)
        proxy.drop(1)  # a step carries its step index, so it is retried past a dropped connection (once only)
        result = client.step(f"search[{QUERY}]")
        assert result["action_feedback"]["valid"] and proxy.dropped == 1
        proxy.drop(10)  # retries are bounded: three attempts, then the error
        with pytest.raises(ServiceError, match="cannot reach the service") as caught:
            client.step(f"search[{QUERY}]")
        assert caught.value.status == 0 and isinstance(caught.value.__cause__, httpx.TransportError)
        assert proxy.dropped == 4
        proxy.drop(0)
        proxy.drop(1)  # a terminate is not retried after a connection that broke
        with pytest.raises(ServiceError, match="cannot reach the service"):
            client.terminate()
        proxy.drop(0)
        assert proxy.dropped == 5
        proxy.drop(2)  # a release is: it is retried past two dropped connections and succeeds
        client.close()
        assert proxy.dropped == 7
        assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4

        other = ShopClient(f"http://127.0.0.1:{proxy.port}")
        other.reset(0)
        proxy.drop(10)  # retries are bounded: three attempts, then the error
        with pytest.raises(ServiceError, match="cannot reach the service"):
            other.release()
        assert proxy.dropped == 10
        proxy.drop(0)
        assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 3  # that lease is left to idle reclaim
        httpx.post(f"{base_url}/api/shop_agent", json={"action": "release_all"}).raise_for_status()
    finally:
        proxy.close()


def test_client_reset_after_terminate_re_leases_like_shop_env_and_close_releases(base_url):
    client = ShopClient(base_url)
    client.reset(3)
    client.terminate("action_limit")
    assert client.done
    again = client.reset(4)  # a finished episode: the client releases and leases again, as ShopEnv allows
    assert again["idx"] == 4 and not client.done and "lease_id" not in again
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 3
    client.reset(3)  # a running episode too: one lease at a time, never a leaked slot
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 3
    client.close()
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4
    with pytest.raises(ValueError, match="boom"), ShopClient(base_url) as ctx:  # released even on an exception
        ctx.reset(4)
        raise ValueError("boom")
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 4


# --------------------------------------------------------------------------------------------- pool properties
OPS = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.integers(0, 0)),
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("stale"), st.integers(0, 20)),
    st.tuples(st.just("advance"), st.integers(1, 8)),
    st.tuples(st.just("release_all"), st.integers(0, 0)),
), max_size=40)


@given(size=st.integers(1, 4), ops=OPS)
@settings(max_examples=150, deadline=None)
def test_pool_invariants_under_random_operations(size, ops):
    """Slots are conserved, a slot has at most one live lease, waiters are served strictly in arrival order,
    nobody waits while a slot is free, and released or reclaimed leases are stale (LeaseError)."""

    async def scenario() -> None:
        now = [0.0]
        pool: LeasePool[int] = LeasePool(size, idle_timeout=5, clock=lambda: now[0])
        live: list = []        # leases handed out and not yet released, in hand-out order
        dead: list = []        # leases released or reclaimed
        arrivals: list[int] = []
        served: list[int] = []
        pending: list[asyncio.Task] = []

        async def acquire(ticket: int) -> None:
            lease = await pool.acquire(ticket)
            served.append(ticket)
            live.append(lease)

        for number, (op, arg) in enumerate(ops):
            if op == "acquire":
                arrivals.append(number)
                pending.append(asyncio.create_task(acquire(number)))
            elif op == "release" and live:
                lease = live.pop(arg % len(live))
                pool.release(lease.slot, lease.lease_id)
                dead.append(lease)
            elif op == "stale" and dead:
                lease = dead[arg % len(dead)]
                with pytest.raises(LeaseError):
                    pool.get(lease.slot, lease.lease_id)
            elif op == "advance":
                now[0] += arg
                before = {lease.lease_id for lease in live}
                pool.reclaim_idle()
                for lease in list(live):
                    if now[0] - lease.last_used > 5:
                        live.remove(lease)
                        dead.append(lease)
                assert {lease.lease_id for lease in live} <= before
            elif op == "release_all":
                pool.release_all()
                dead += live
                live.clear()
            for _ in range(3):
                await asyncio.sleep(0)  # let handed-over waiters run
            assert pool.live == len(live) and pool.live + pool.free_slots == size
            assert len({lease.slot for lease in live}) == len(live)
            assert len({lease.lease_id for lease in live + dead}) == len(live) + len(dead)
            assert pool.waiting == 0 or pool.free_slots == 0
            assert served == arrivals[:len(served)]  # FIFO: the served are exactly the earliest arrivals
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    asyncio.run(scenario())


def test_router_route_answers_like_the_fast_path(world):
    """``ServiceApp`` answers /api/shop_agent before routing; the FastAPI route behind it gives the same bytes."""
    from fastapi import FastAPI

    app = create_app(world, slots=2)

    async def router_only(scope, receive, send):
        await FastAPI.__call__(app, scope, receive, send)

    async def run() -> None:
        for target in (app, router_only):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=target), base_url="http://localhost") as http:
                reset = (await http.post("/api/shop_agent", json={"action": "reset", "idx": 0})).json()["result"]
                lease = {"env_idx": reset["env_idx"], "lease_id": reset["lease_id"]}
                step = await http.post("/api/shop_agent", json={"action": "interact", **lease,
                                                                "response": f"search[{QUERY}]"})
                bad = await http.post("/api/shop_agent", content=b"\xff", headers={"content-type": "application/json"})
                results.append((step.status_code, step.json()["result"]["observation"], bad.status_code,
                                bad.json(), step.headers["content-type"]))
                await http.post("/api/shop_agent", json={"action": "release_all"})

    results: list = []
    asyncio.run(run())
    assert results[0] == results[1] and results[0][0] == 200 and results[0][2] == 400


def test_serve_refuses_impossible_worker_counts(prepared_dir, capsys):
    from shopsimrl.cli import main

    assert main(["serve", "--data", str(prepared_dir), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--data", str(prepared_dir), "--workers", "3", "--slots", "2"]) == 2
    assert "--slots (2) must be at least --workers (3)" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 13: ghost waiters (item 3)


def _send_and_hang_up(url: str, path: str, body: bytes) -> None:
    """Send one POST on a raw socket and close it without reading the answer (a client that gave up)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.3)  # queued by now


def _wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_queued_resets_of_departed_clients_leave_the_queue(world):
    """A queued reset whose client hangs up is dropped: the freed slot is free, not held by a ghost."""
    with serve(create_app(world, slots=1)) as url, httpx.Client(base_url=url) as http:
        holder = _post(http, {"action": "reset", "idx": 0})["result"]
        _send_and_hang_up(url, "/api/shop_agent", b'{"action": "reset", "idx": 1}')
        _send_and_hang_up(url, "/v1/sessions", b'{"task_id": 2}')
        assert _wait_for(lambda: http.get("/healthz").json()["waiting_resets"] == 0)
        _post(http, {"action": "release_one", "env_idx": holder["env_idx"], "lease_id": holder["lease_id"]})
        health = http.get("/healthz").json()
        assert health["free_slots"] == 1 and health["live_sessions"] == 0
        again = _post(http, {"action": "reset", "idx": 0, "wait_timeout": 1})["result"]
        _send_and_hang_up(url, "/api/shop_agent", b'{"action": "reset", "idx": 1}')
        assert _wait_for(lambda: http.get("/healthz").json()["waiting_resets"] == 0)
        _post(http, {"action": "release_all"})
        assert http.get("/healthz").json()["free_slots"] == 1 and again["env_idx"] == 0


def test_a_cancelled_acquire_leaves_no_waiter():
    async def scenario() -> None:
        pool: LeasePool[str] = LeasePool(1, idle_timeout=None)
        held = await pool.acquire("a")
        ghost = asyncio.create_task(pool.acquire("ghost"))
        await asyncio.sleep(0)
        assert pool.waiting == 1
        ghost.cancel()
        await asyncio.gather(ghost, return_exceptions=True)
        assert pool.waiting == 0 and len(pool._waiters) == 0
        pool.release(held.slot, held.lease_id)
        assert pool.free_slots == 1

    asyncio.run(scenario())

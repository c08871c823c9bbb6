"""A persona reset of a standard task is a clear typed error on every path (issue 18 item 5)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from error_kinds import raises_kind
from live_server import serve
from shopsimrl.env import ShopWorld
from shopsimrl.env.gym import ShopGymEnv
from shopsimrl.errors import RequestError, ShopSimError, persona_unavailable
from shopsimrl.server import AsyncShopClient, ShopClient, create_app

STANDARD = 1  # fixture task 1 (824100258498) has no persona
PERSONA = 0


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_url(world):
    with serve(create_app(world, slots=2, reset_wait_timeout=1.0)) as url:
        yield url


def test_fixture_tasks_have_the_modes_the_tests_assume(world):
    assert not world.catalog.goal(STANDARD).get("user_persona")
    assert world.catalog.goal(PERSONA).get("user_persona")


def test_in_process_persona_reset_of_a_standard_task_is_a_typed_error(world):
    env = world.new_env()
    with raises_kind(RequestError, "persona_unavailable", match=f"task {STANDARD} is a standard task without a persona"):
        env.reset(STANDARD, persona=True)
    assert isinstance(persona_unavailable(1), ShopSimError)
    own = env.reset(STANDARD)  # no mode given: the task's own mode
    assert own["task_mode"] == "standard" and own["user_persona"] == {}
    assert env.reset(PERSONA)["task_mode"] == "persona"
    assert env.reset(PERSONA, persona=False)["task_mode"] == "standard"


def test_gym_persona_reset_of_a_standard_task_is_a_typed_error(world):
    gym_env = ShopGymEnv(world, split="standard")
    with raises_kind(RequestError, "persona_unavailable"):
        gym_env.reset(options={"task_id": STANDARD, "persona": True})
    _, info = gym_env.reset(options={"task_id": STANDARD})
    assert info["user_persona"] == {}


def test_reference_api_answers_400_and_keeps_the_slot(base_url):
    with httpx.Client(base_url=base_url) as http:
        response = http.post("/api/shop_agent", json={"action": "reset", "idx": STANDARD, "if_persona": True})
        assert response.status_code == 400
        assert "standard task without a persona" in response.json()["error"]
        assert http.get("/healthz").json()["free_slots"] == 2


def test_v1_api_answers_400(base_url):
    with httpx.Client(base_url=base_url) as http:
        response = http.post("/v1/sessions", json={"task_id": STANDARD, "persona": True})
        assert response.status_code == 400
        assert "standard task without a persona" in response.json()["error"]


def test_clients_raise_the_typed_error_and_default_to_the_tasks_own_mode(base_url, world):
    with ShopClient(base_url) as client:
        with raises_kind(RequestError, "persona_unavailable"):
            client.reset(STANDARD, persona=True)
        assert client.reset(STANDARD) == world.new_env().reset(STANDARD)
        assert client.reset(PERSONA)["task_mode"] == "persona"

    async def run() -> dict:
        async with AsyncShopClient(base_url) as client:
            with raises_kind(RequestError, "persona_unavailable"):
                await client.reset(STANDARD, persona=True)
            return await client.reset(STANDARD)

    assert asyncio.run(run())["task_mode"] == "standard"
    assert httpx.get(f"{base_url}/healthz").json()["free_slots"] == 2


def test_async_client_reset_after_terminate_re_leases(base_url):
    async def run() -> tuple[dict, int]:
        async with AsyncShopClient(base_url) as client:
            await client.reset(PERSONA)
            await client.terminate("generation_length")
            again = await client.reset(PERSONA)
            return again, httpx.get(f"{base_url}/healthz").json()["free_slots"]

    again, free = asyncio.run(run())
    assert again["observation"].startswith("页面：搜索首页") and free == 1

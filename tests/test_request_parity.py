"""Thin transports (issue 23 item 3): every argument check is the environment's (``env.requests``), so a request
fails the same way in process, through the reference API (``ShopClient``) and through ``/v1``; the response cap,
the seed range and the persona default are the same on every path.

Each case runs on all three paths: in process and through ``ShopClient`` the same error class and message;
through ``/v1`` the same class and message where the body passes the model, or the model's own 422 where its
schema already refuses the value (a type or range the OpenAPI document states).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from error_kinds import raises_kind
from live_server import serve
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.env.requests import MAX_RESPONSE_CHARS
from shopsimrl.errors import RequestError, ShopSimError
from shopsimrl.server.app import create_app
from shopsimrl.server.client import ShopClient
from shopsimrl.server.http_errors import rebuild

MODEL = "the /v1 model refuses it"


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def url(world: ShopWorld) -> Any:
    with serve(create_app(world, slots=4)) as base:
        yield base


def _tasks(world: ShopWorld) -> tuple[int, int]:
    ids = world.catalog.split("all")
    persona = next(t for t in ids if world.catalog.goal(t).get("user_persona"))
    standard = next(t for t in ids if not world.catalog.goal(t).get("user_persona"))
    return persona, standard


def _raised(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(ShopSimError) as caught:
        call()
    return type(caught.value), str(caught.value)


def _v1(url: str, path: str, body: dict[str, Any]) -> tuple[type[BaseException], str] | str | dict[str, Any]:
    answer = httpx.post(f"{url}/v1{path}", json=body, timeout=30)
    payload = answer.json()
    if answer.status_code < 300:
        return dict(payload)
    if payload.get("code") == "validation_error":
        return MODEL
    error = rebuild(payload["code"], payload["error"])
    assert error is not None, payload
    return type(error), str(error)


RESETS: list[tuple[str, dict[str, Any], bool]] = [  # (case, reset arguments, whether /v1's model refuses them)
    ("task id not an integer", {"task_id": "3"}, True),
    ("unknown task", {"task_id": 10**9}, False),
    ("interaction mode", {"interaction_mode": "many_turns"}, True),
    ("persona not a boolean", {"persona": "yes"}, True),
    ("persona on a standard task", {"persona": True, "standard": True}, False),
    ("unknown shopper", {"shopper": "bob"}, True),
    ("llm shopper without an endpoint", {"shopper": "llm"}, False),
    ("seed without a shopper", {"shopper_seed": 5}, False),
    ("seed beyond 64 bits", {"shopper": "rule", "shopper_seed": 2**63}, True),
    ("seed below 64 bits", {"shopper": "rule", "shopper_seed": -(2**63) - 1}, True),
    ("seed a boolean", {"shopper": "rule", "shopper_seed": True}, True),
]


@pytest.mark.parametrize(("arguments", "model_refuses"), [(a, m) for _, a, m in RESETS], ids=[c for c, _, _ in RESETS])
def test_a_bad_reset_fails_alike_on_every_path(world: ShopWorld, url: str, arguments: dict[str, Any],
                                               model_refuses: bool) -> None:
    persona_task, standard_task = _tasks(world)
    arguments = dict(arguments)
    task_id = arguments.pop("task_id", standard_task if arguments.pop("standard", False) else persona_task)
    expected = _raised(lambda: world.new_env(shoppers=shopper_registry()).reset(task_id, **arguments))
    with ShopClient(url) as client:
        assert _raised(lambda: client.reset(task_id, **arguments)) == expected
    body = {"task_id": task_id, **arguments}
    assert _v1(url, "/sessions", body) == (MODEL if model_refuses else expected)


def test_the_response_cap_and_the_termination_reason_are_the_environments(world: ShopWorld, url: str) -> None:
    task_id = _tasks(world)[1]
    longest, too_long = "search[枕头]" + " " * (MAX_RESPONSE_CHARS - 10), "x" * (MAX_RESPONSE_CHARS + 1)
    env = world.new_env(shoppers=shopper_registry())
    env.reset(task_id)
    with ShopClient(url) as client:
        client.reset(task_id)
        for path in (env, client):
            assert path.step(longest)["action_feedback"]["valid"] is True  # exactly the cap: accepted
            kind, message = _raised(lambda p=path: p.step(too_long))  # type: ignore[misc]
            assert kind is RequestError and f"{MAX_RESPONSE_CHARS + 1} characters" in message
        expected = _raised(lambda: env.terminate("bored"))
        assert _raised(lambda: client.terminate("bored")) == expected
    session = httpx.post(f"{url}/v1/sessions", json={"task_id": task_id}, timeout=30).json()["session_id"]
    assert _v1(url, f"/sessions/{session}/step", {"action": too_long})[0] is RequestError  # type: ignore[index]
    httpx.delete(f"{url}/v1/sessions/{session}", timeout=30)


def test_persona_defaults_to_the_tasks_own_mode_on_every_path(world: ShopWorld, url: str) -> None:
    for task_id in _tasks(world):
        expected = world.new_env(shoppers=shopper_registry()).reset(task_id)["task_mode"]
        with ShopClient(url) as client:
            assert client.reset(task_id)["task_mode"] == expected
        created = _v1(url, "/sessions", {"task_id": task_id})
        assert isinstance(created, dict) and created["task_mode"] == expected
        httpx.delete(f"{url}/v1/sessions/{created['session_id']}", timeout=30)


def test_the_service_checks_before_it_waits_for_a_slot(world: ShopWorld) -> None:
    """With every slot leased, a bad reset fails at once (it never queues behind the leases)."""
    import asyncio

    from shopsimrl.errors import RequestError
    from shopsimrl.server.service import EnvService

    service = EnvService(world, slots=1, reset_wait_timeout=30.0)
    task_id = _tasks(world)[1]

    async def go() -> None:
        await service.reset(task_id)
        with raises_kind(RequestError, "dialogue_unavailable"):
            await asyncio.wait_for(service.reset(task_id, shopper_seed=3), timeout=2.0)

    asyncio.run(go())


def test_the_v1_models_are_the_environments_result_types_key_for_key() -> None:
    """``server/models.py`` keeps its OpenAPI descriptions; its fields are the TypedDicts' keys (plus the lease)."""
    from shopsimrl.env import interface
    from shopsimrl.server import models

    lease = {"session_id", "env_idx"}
    assert set(models.SessionCreated.model_fields) == set(interface.ResetResult.__annotations__) | lease
    required = {name for name, field in models.SessionCreated.model_fields.items() if field.is_required()}
    assert required == set(interface.RESET_REQUIRED_KEYS) | lease
    step_keys = set(interface.StepResult.__annotations__) | set(interface.TerminateResult.__annotations__)
    assert set(models.StepResult.model_fields) == step_keys
    required = {name for name, field in models.StepResult.model_fields.items() if field.is_required()}
    assert required == set(interface.STEP_REQUIRED_KEYS) - {"action_feedback"}  # absent after terminate


def test_the_dialogue_transcript_is_the_same_on_every_path(world: ShopWorld, url: str) -> None:
    """Private until the episode ends (or for an ``include_private_goal`` reset), then identical everywhere."""
    task_id = _tasks(world)[1]
    actions = ["ask_user[预算是多少？]", "ask_user[有什么要求？]"]
    env = world.new_env(shoppers=shopper_registry())
    env.reset(task_id, shopper="rule")
    with ShopClient(url) as client:
        client.reset(task_id, shopper="rule")
        session = httpx.post(f"{url}/v1/sessions", json={"task_id": task_id, "shopper": "rule"}, timeout=30).json()
        path = f"{url}/v1/sessions/{session['session_id']}"
        for action in actions:
            env.step(action)
            client.step(action)
            httpx.post(f"{path}/step", json={"action": action}, timeout=30)
        refused = _raised(env.dialogue_transcript)
        assert _raised(client.dialogue_transcript) == refused
        answer = httpx.get(f"{path}/dialogue_transcript", timeout=30).json()
        assert rebuild(answer["code"], answer["error"]).__class__ is refused[0] and answer["error"] == refused[1]
        env.terminate("action_limit")
        client.terminate("action_limit")
        httpx.post(f"{path}/terminate", json={"reason": "action_limit"}, timeout=30)
        transcript = env.dialogue_transcript()
        assert transcript and [entry["question"] for entry in transcript] == ["预算是多少？", "有什么要求？"]
        assert client.dialogue_transcript() == transcript
        assert httpx.get(f"{path}/dialogue_transcript", timeout=30).json()["transcript"] == transcript
        httpx.delete(path, timeout=30)
        client.reset(task_id, shopper="rule", include_private_goal=True)  # a private reset: readable throughout
        client.step(actions[0])
        assert [entry["question"] for entry in client.dialogue_transcript() or []] == ["预算是多少？"]
    plain = world.new_env(shoppers=shopper_registry())
    plain.reset(task_id)
    assert plain.dialogue_transcript() is None

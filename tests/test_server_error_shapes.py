"""Every error of the `serve` service and the policy server is a typed 4xx in that server's one JSON shape
(issue 28 item 2; OpenEnv's task routes: tests/test_openenv.py). Each route that takes a task, an index or a
body gets an unknown value, a negative index and a wrong type."""

from __future__ import annotations

import httpx
import pytest

from live_server import serve
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app

UNKNOWN, NEGATIVE, WRONG_TYPE = "unknown", "negative", "wrong type"


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def service(world, tmp_path_factory):
    with serve(create_app(world, slots=2, reset_wait_timeout=0.5, runs_dir=str(tmp_path_factory.mktemp("runs")))) as url:
        yield url


@pytest.fixture(scope="module")
def policy_server(world):
    with serve(create_policy_app(world, policy="oracle")) as url:
        yield url


SERVICE_REQUESTS = {  # (method, path, body) per mistake, for every route of the service that takes input
    ("reference reset", UNKNOWN): ("POST", "/api/shop_agent", {"action": "reset", "idx": 10**9}),
    ("reference reset", NEGATIVE): ("POST", "/api/shop_agent", {"action": "reset", "idx": -1}),
    ("reference reset", WRONG_TYPE): ("POST", "/api/shop_agent", {"action": "reset", "idx": "zero"}),
    ("reference interact", UNKNOWN): ("POST", "/api/shop_agent", {"action": "interact", "env_idx": 99,
                                                                  "lease_id": "nope", "response": "search[x]"}),
    ("reference interact", NEGATIVE): ("POST", "/api/shop_agent", {"action": "interact", "env_idx": -1,
                                                                   "lease_id": "nope", "response": "search[x]"}),
    ("reference interact", WRONG_TYPE): ("POST", "/api/shop_agent", {"action": "interact", "env_idx": "a"}),
    ("v1 tasks", UNKNOWN): ("GET", "/v1/tasks?offset=100000000", None),
    ("v1 tasks", NEGATIVE): ("GET", "/v1/tasks?offset=-1", None),
    ("v1 tasks", WRONG_TYPE): ("GET", "/v1/tasks?limit=many", None),
    ("v1 create", UNKNOWN): ("POST", "/v1/sessions", {"task_id": 10**9}),
    ("v1 create", NEGATIVE): ("POST", "/v1/sessions", {"task_id": -1}),
    ("v1 create", WRONG_TYPE): ("POST", "/v1/sessions", {"task_id": "zero"}),
    ("v1 step", UNKNOWN): ("POST", "/v1/sessions/nope/step", {"action": "search[x]"}),
    ("v1 step", NEGATIVE): ("POST", "/v1/sessions/-1/step", {"action": "search[x]"}),
    ("v1 step", WRONG_TYPE): ("POST", "/v1/sessions/nope/step", {"action": 5}),
    ("v1 terminate", UNKNOWN): ("POST", "/v1/sessions/nope/terminate", {"reason": "action_limit"}),
    ("v1 terminate", WRONG_TYPE): ("POST", "/v1/sessions/nope/terminate", {"reason": 5}),
    ("v1 state", UNKNOWN): ("GET", "/v1/sessions/nope", None),
    ("v1 release", UNKNOWN): ("DELETE", "/v1/sessions/nope", None),
    ("replay run", UNKNOWN): ("GET", "/api/runs/nope", None),
    ("replay episode", UNKNOWN): ("GET", "/api/runs/nope/episodes/x", None),
    ("routing", UNKNOWN): ("GET", "/nowhere", None),
    ("routing", WRONG_TYPE): ("GET", "/api/shop_agent", None),
}


@pytest.mark.parametrize("case", sorted(SERVICE_REQUESTS), ids=lambda case: f"{case[0]}-{case[1]}")
def test_every_service_route_answers_a_mistake_with_error_and_code(service, case):
    method, path, body = SERVICE_REQUESTS[case]
    with httpx.Client(base_url=service) as http:
        answer = http.request(method, path, json=body)
    if case == ("v1 tasks", UNKNOWN):  # a page past the end is an empty page, not an error
        assert answer.status_code == 200 and answer.json()["tasks"] == []
        return
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    payload = answer.json()
    assert set(payload) == {"error", "code"} and isinstance(payload["error"], str) and payload["code"], payload


def _chat(task_id):
    return {"model": "shopsim-oracle", "messages": [{"role": "user", "content": "买个杯子"}],
            "tools": [{"type": "function", "function": {"name": "search", "parameters": {}}}],
            "shopsim_task_id": task_id}


POLICY_REQUESTS = {
    ("chat task id", UNKNOWN): ("POST", "/v1/chat/completions", _chat(10**9), 404),
    ("chat task id", NEGATIVE): ("POST", "/v1/chat/completions", _chat(-1), 404),
    ("chat task id", WRONG_TYPE): ("POST", "/v1/chat/completions", _chat("zero"), 400),
    ("chat messages", WRONG_TYPE): ("POST", "/v1/chat/completions", {"messages": "hi"}, 400),
    ("chat model", UNKNOWN): ("POST", "/v1/chat/completions", {**_chat(None), "model": "gpt-9"}, 404),
    ("models", WRONG_TYPE): ("POST", "/v1/models", {}, 405),
    ("routing", UNKNOWN): ("GET", "/v1/nowhere", None, 404),
}


@pytest.mark.parametrize("case", sorted(POLICY_REQUESTS), ids=lambda case: f"{case[0]}-{case[1]}")
def test_every_policy_server_route_answers_in_the_openai_error_shape(policy_server, case):
    method, path, body, status = POLICY_REQUESTS[case]
    with httpx.Client(base_url=policy_server) as http:
        answer = http.request(method, path, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(answer.json()) == {"error"} and set(error) == {"message", "type", "code"}, answer.text
    assert error["code"] == status and isinstance(error["message"], str)

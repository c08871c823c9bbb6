"""One error tree and one HTTP mapping (issue 12 item 4).

- every exception class the package defines derives from ``ShopSimError`` (found by importing every module);
- every error class the env and the server raise has exactly one row of ``server/http_errors.py``'s table, whose
  status and code are written out here (a change of the wire contract fails this test);
- the same bad input raises the same class with the same message in process (``ShopEnv``) and through both
  HTTP clients against a real uvicorn server, because the clients map the answer's code, never its text.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib
import inspect
import json
import pkgutil
import re
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shopsimrl
from live_server import serve
from shopsimrl import errors
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import EpisodeStateError, LeaseError, RequestError, ServiceError, ShopSimError
from shopsimrl.server import AsyncShopClient, ShopClient, create_app
from shopsimrl.server.http_errors import (
    CLASS_STATUS,
    PUBLIC_CODES,
    STATUS_OF_CODE,
    encode,
    public_rows,
    rebuild,
    row_of,
    status_of,
)
from shopsimrl.server.service import EnvService

SRC = Path(shopsimrl.__file__).parent
PERSONA_TASK, STANDARD_TASK, UNKNOWN_TASK = 0, 1, 10**9

# Packages whose modules need an optional extra that the dev venv may lack (each is imported where it is
# installed; the classes they define are still checked by the AST scan below).
OPTIONAL_IMPORTS = {"openenv", "verl", "ray", "torch", "trl", "verifiers", "transformers", "datasets", "slime"}


# ---------------------------------------------------------------------------------------------- the tree
def _package_modules() -> tuple[list[types.ModuleType], list[str]]:
    loaded, skipped = [], []
    for info in pkgutil.walk_packages([str(SRC)], prefix="shopsimrl."):
        try:
            loaded.append(importlib.import_module(info.name))
        except ImportError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing not in OPTIONAL_IMPORTS:
                raise
            skipped.append(info.name)
    return loaded, skipped


def _exception_classes(modules: list[types.ModuleType]) -> dict[str, type[BaseException]]:
    found = {}
    for module in modules:
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, Exception)
                    and value.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = value
    return found


def _outside_the_tree(classes: dict[str, type[BaseException]]) -> list[str]:
    return sorted(name for name, cls in classes.items() if not issubclass(cls, ShopSimError))


def test_every_exception_class_in_the_package_is_a_shopsim_error():
    modules, skipped = _package_modules()
    classes = _exception_classes(modules)
    assert _outside_the_tree(classes) == []
    # the walk really found the package's errors, wherever they are defined
    names = {name.rsplit(".", 1)[1] for name in classes}
    assert {"LeaseError", "AdmissionError", "RequestError", "ServiceError",
            "PostingsUnavailable", "_Abort", "_Reject", "RolloutError"} <= names, names
    assert len(classes) >= 15 and len(modules) > 100 and len(skipped) < 15, (len(classes), len(modules), skipped)


def test_the_tree_check_can_fail():
    stray = types.ModuleType("stray")
    exec("class Stray(ValueError):\n    pass\n", stray.__dict__)
    stray.Stray.__module__ = "stray"
    assert _outside_the_tree(_exception_classes([stray])) == ["stray.Stray"]


def test_modules_skipped_for_a_missing_extra_define_errors_in_the_tree_too():
    """Modules the dev venv cannot import are read as source: no class in the package has only builtin
    exceptions as its bases."""
    builtin = {name for name, value in vars(builtins).items()
               if inspect.isclass(value) and issubclass(value, BaseException)}
    bare = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                if bases and all(base in builtin for base in bases) and node.name != "ShopSimError":
                    bare.append(f"{path.relative_to(SRC)}:{node.name}({', '.join(bases)})")
    assert bare == []


# ---------------------------------------------------------------------------------------------- one table
# Every (class, code) raised by the env or the server -> (status, answer code). Written out: the wire contract.
EXPECTED = {
    (errors.RequestError, "unknown_task"): (404, "unknown_task"),
    (errors.RequestError, "persona_unavailable"): (400, "persona_unavailable"),
    (errors.RequestError, "dialogue_unavailable"): (400, "dialogue_unavailable"),
    (errors.EpisodeStateError, "episode_terminated"): (409, "episode_terminated"),
    (errors.EpisodeStateError, "no_active_episode"): (409, "no_active_episode"),
    (errors.RequestError, "invalid_request"): (400, "invalid_request"),
    (errors.RequestError, "invalid_task_id"): (400, "invalid_task_id"),
    (errors.RequestError, "invalid_action"): (400, "invalid_action"),
    (errors.RequestError, "response_too_long"): (413, "response_too_long"),
    (errors.ShopperCallError, "shopper_call_failed"): (502, "shopper_call_failed"),
    (errors.LeaseError, "stale_lease"): (409, "stale_lease"),
    (errors.LeaseError, "session_not_found"): (404, "session_not_found"),
    (errors.AdmissionError, "no_free_slot"): (503, "no_free_slot"),
    (errors.ServiceError, "worker_unavailable"): (502, "worker_unavailable"),
    (errors.DataError, "data_integrity"): (503, "data_integrity"),
    (errors.DataError, "search_unavailable"): (503, "search_unavailable"),
    (errors.RequestError, "invalid_replay_request"): (400, "invalid_replay_request"),
    (errors.RequestError, "replay_not_found"): (404, "replay_not_found"),
    (errors.DataError, "observation"): (400, "bad_request"),
    (errors.DataError, "invalid_goal"): (400, "bad_request"),
    (errors.DataError, "invalid_selection"): (400, "bad_request"),
    (errors.DataError, "data_directory"): (400, "bad_request"),
    (errors.DataError, "invalid_split"): (400, "invalid_split"),
    (errors.ShopSimError, "error"): (400, "bad_request"),
    (errors.PolicyError, "policy"): (400, "bad_request"),
    (errors.ServiceError, "service"): (400, "bad_request"),
    # the guard's admission refusals
    (errors.AdmissionError, "body_too_large"): (413, "body_too_large"),
    (errors.AdmissionError, "host_not_served"): (421, "host_not_served"),
    (errors.AdmissionError, "cross_origin_refused"): (403, "cross_origin_refused"),
    (errors.AdmissionError, "unauthorized"): (401, "unauthorized"),
    (errors.AdmissionError, "unsupported_media_type"): (415, "unsupported_media_type"),
    (errors.AdmissionError, "invalid_text"): (400, "invalid_text"),
    (errors.AdmissionError, "nested_too_deep"): (400, "nested_too_deep"),
}


def _instance(kind: type[ShopSimError], code: str) -> ShopSimError:
    if kind is errors.ShopperCallError:
        return errors.ShopperCallError(3, "x")
    if kind is errors.ServiceError:
        return errors.ServiceError(0, "x", code=code)
    return kind("x", code=code)


@pytest.mark.parametrize(("kind", "expected"), list(EXPECTED.items()), ids=lambda value: "-".join(
    getattr(v, "__name__", str(v)) for v in value) if isinstance(value, tuple) else str(value))
def test_each_error_code_has_one_status_and_answer_code(kind, expected):
    row = row_of(_instance(*kind))
    assert (row.status, row.code) == expected
    assert status_of(_instance(*kind)) == expected[0]


def test_the_table_is_a_few_class_rows_and_the_codes_that_differ():
    assert len(CLASS_STATUS) == 5 and len(STATUS_OF_CODE) == 14
    public = {code for code, kind in errors.KIND_OF_CODE.items() if kind in CLASS_STATUS} | set(STATUS_OF_CODE)
    assert public | {"bad_request"} == {row.code for row in public_rows()}
    assert public == {answer for (_, code), (_, answer) in EXPECTED.items() if answer != "bad_request"}
    assert all(code in errors.KIND_OF_CODE for code in STATUS_OF_CODE)


def _raised_names(root: Path) -> set[str]:
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                names.add(node.exc.func.id)
    return names


def test_everything_the_env_and_the_server_raise_is_typed():
    """Found by reading every ``raise X(...)`` of env/ and server/: only typed errors (their codes are checked
    against their classes by test_error_module.py)."""
    raised = _raised_names(SRC / "env") | _raised_names(SRC / "server")
    known = {kind.__name__ for kind, _ in EXPECTED} | {"unknown_task", "persona_unavailable"}
    internal = {"_Abort", "EnvCheckError", "AssertionError", "TypeError", "SystemExit"}
    # AssertionError: the clients' unreachable line; TypeError: a programming error; SystemExit: a signal;
    # _Abort and EnvCheckError: the conformance checker's own verdicts, never sent over HTTP
    untyped = raised - known - internal - {"_unreachable"}  # the clients' transport failure
    assert untyped == set(), untyped
    assert {"persona_unavailable", "EpisodeStateError", "LeaseError", "RequestError", "AdmissionError"} <= raised


def test_codes_name_one_class_each_and_the_clients_rebuild_them():
    for row in public_rows():
        rebuilt = rebuild(row.code, "the service's own words")
        assert type(rebuilt) is row.error and str(rebuilt) == "the service's own words"
        assert rebuilt.code == (row.code if row.code != "bad_request" else "error")
    assert rebuild("no_such_code", "x") is None
    assert rebuild("observation", "x") is None  # a code the service never sends


def test_the_contract_documents_the_table_row_for_row():
    doc = (SRC.parent.parent / "docs" / "contract.md").read_text("utf-8")
    section = doc[doc.index('<a id="http-errors"></a>'):doc.index('<a id="health-and-ui"></a>')]
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \| `(\w+)` \|$", section, re.MULTILINE)
    assert rows == [(row.code, str(row.status), row.error.__name__) for row in public_rows()]


# ---------------------------------------------------------------------------------------------- one behaviour
@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_url(world):
    with serve(create_app(world, slots=4, reset_wait_timeout=5.0)) as url:
        yield url


Call = tuple[str, tuple[Any, ...], dict[str, Any]]

# name -> (calls that must succeed, the bad call, the class and code all three paths raise)
CASES: dict[str, tuple[list[Call], Call, tuple[type[ShopSimError], str]]] = {
    "unknown task": ([], ("reset", (UNKNOWN_TASK,), {}), (RequestError, "unknown_task")),
    "task id not an integer": ([], ("reset", ("7",), {}), (RequestError, "invalid_task_id")),
    "persona on a standard task": ([], ("reset", (STANDARD_TASK,), {"persona": True}),
                                   (RequestError, "persona_unavailable")),
    "unknown interaction mode": ([], ("reset", (PERSONA_TASK, None, "three_turn"), {}),
                                 (RequestError, "invalid_request")),
    "unknown shopper": ([], ("reset", (PERSONA_TASK,), {"shopper": "robot"}), (RequestError, "dialogue_unavailable")),
    "llm shopper": ([], ("reset", (PERSONA_TASK,), {"shopper": "llm"}), (RequestError, "dialogue_unavailable")),
    "step before reset": ([], ("step", ("search[x]",), {}), (EpisodeStateError, "no_active_episode")),
    "step after the end": ([("reset", (STANDARD_TASK,), {}), ("terminate", (), {})],
                           ("step", ("click[buy now]",), {}), (EpisodeStateError, "episode_terminated")),
    "terminate after the end": ([("reset", (STANDARD_TASK,), {}), ("terminate", ("generation_length",), {})],
                                ("terminate", (), {}), (EpisodeStateError, "episode_terminated")),
    "unknown termination reason": ([("reset", (STANDARD_TASK,), {})], ("terminate", ("bored",), {}),
                                   (RequestError, "invalid_request")),
    "action not a string": ([("reset", (STANDARD_TASK,), {})], ("step", (123,), {}), (RequestError, "invalid_action")),
    "action missing": ([("reset", (STANDARD_TASK,), {})], ("step", (None,), {}), (RequestError, "invalid_action")),
}


def _run_sync(env: Any, calls: list[Call], bad: Call) -> BaseException:
    for name, args, kwargs in calls:
        getattr(env, name)(*args, **kwargs)
    name, args, kwargs = bad
    with pytest.raises(ShopSimError) as caught:
        getattr(env, name)(*args, **kwargs)
    return caught.value


async def _run_async(env: AsyncShopClient, calls: list[Call], bad: Call) -> BaseException:
    for name, args, kwargs in calls:
        result = getattr(env, name)(*args, **kwargs)
        if asyncio.iscoroutine(result):
            await result
    name, args, kwargs = bad
    with pytest.raises(ShopSimError) as caught:
        result = getattr(env, name)(*args, **kwargs)
        if asyncio.iscoroutine(result):
            await result
    return caught.value


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_bad_input_raises_the_same_error_on_every_path(case, world, base_url):
    calls, bad, expected = CASES[case]
    in_process = _run_sync(ShopEnv(world, shoppers=shopper_registry()), calls, bad)
    with ShopClient(base_url) as client:
        sync = _run_sync(client, calls, bad)

    async def run_async() -> BaseException:
        async with AsyncShopClient(base_url) as client:
            return await _run_async(client, calls, bad)

    asynchronous = asyncio.run(run_async())
    for error in (in_process, sync, asynchronous):
        assert (type(error), error.code) == expected, (case, type(error), error)
    assert str(sync) == str(asynchronous) == str(in_process), case
    if isinstance(in_process, RequestError):
        assert sync.task_id == asynchronous.task_id == in_process.task_id  # type: ignore[attr-defined]


def test_an_unknown_or_reclaimed_lease_is_a_lease_error_in_process_and_through_both_clients(world, base_url):
    """No lease exists in ``ShopEnv``; the in-process side is the service the server runs (``EnvService``)."""
    service = EnvService(world, slots=1)
    with pytest.raises(LeaseError) as in_process:
        service.lease(0, "feedface")
    with ShopClient(base_url) as client:
        client.reset(STANDARD_TASK)
        slot = client._lease["env_idx"]  # type: ignore[index]
        client._lease = {"env_idx": slot, "lease_id": "feedface"}  # unknown
        with pytest.raises(LeaseError) as unknown:
            client.step("search[x]")
        client.reset(STANDARD_TASK)
        httpx.post(f"{base_url}/api/shop_agent", json={"action": "release_all"}).raise_for_status()  # reclaimed
        with pytest.raises(LeaseError) as reclaimed:
            client.step("search[x]")

    async def run_async() -> BaseException:
        async with AsyncShopClient(base_url) as aclient:
            await aclient.reset(STANDARD_TASK)
            aclient._lease = {"env_idx": slot, "lease_id": "feedface"}
            with pytest.raises(LeaseError) as caught:
                await aclient.step("search[x]")
            return caught.value

    asynchronous = asyncio.run(run_async())
    for error in (unknown.value, reclaimed.value, asynchronous):
        assert type(error) is LeaseError and error.code == "stale_lease"
    assert str(unknown.value) == str(asynchronous) == f"stale or invalid lease for environment {slot}"
    assert str(in_process.value) == "stale or invalid lease for environment 0"
    assert str(reclaimed.value).startswith("stale or invalid lease for environment ")


def test_the_clients_keep_service_error_for_the_transport(base_url):
    """No answer, or an answer that is not the service's JSON, is a ServiceError, not a library error."""
    with ShopClient("http://127.0.0.1:9") as nowhere, pytest.raises(ServiceError, match="cannot reach") as caught:
        nowhere.reset(0)
    assert caught.value.status == 0 and not isinstance(caught.value, RequestError)
    with ShopClient(base_url) as client:
        answer = client._http.get("/v1/no-such-route")  # FastAPI's own 404: a code no library class has
        assert answer.json() == {"error": "Not Found", "code": "not_found"}
    from shopsimrl.server.client import _unwrap

    for response in (httpx.Response(502, text="<html>bad gateway</html>"),
                     httpx.Response(500, json={"error": "internal server error", "code": "internal_error"}),
                     httpx.Response(400, json=["not", "an", "object"])):
        with pytest.raises(ServiceError) as failure:
            _unwrap(response)
        assert failure.value.status == response.status_code


def test_http_answers_carry_the_code_of_the_table(base_url):
    """The reference API and /v1 answer the same error with the same status and code (and the message)."""
    reference = httpx.post(f"{base_url}/api/shop_agent", json={"action": "reset", "idx": UNKNOWN_TASK})
    v1 = httpx.post(f"{base_url}/v1/sessions", json={"task_id": UNKNOWN_TASK})
    assert reference.status_code == v1.status_code == 404
    assert reference.json() == v1.json() == {"error": f"unknown or inactive task_id {UNKNOWN_TASK}",
                                             "code": "unknown_task"}
    gone = httpx.post(f"{base_url}/v1/sessions/abc123/step", json={"action": "search[x]"})
    assert gone.status_code == 404 and gone.json()["code"] == "session_not_found"
    stale = httpx.post(f"{base_url}/api/shop_agent",
                       json={"action": "interact", "env_idx": 0, "lease_id": "abc123", "response": "search[x]"})
    assert stale.status_code == 409 and stale.json()["code"] == "stale_lease"
    not_json = httpx.post(f"{base_url}/api/shop_agent", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["code"] == "invalid_request"
    invalid = httpx.post(f"{base_url}/v1/sessions", json={"task_id": "x"})
    assert invalid.status_code == 422 and invalid.json()["code"] == "validation_error"
    run = httpx.get(f"{base_url}/api/runs/no-such-run")  # the replay API
    assert run.status_code == 404 and run.json()["code"] == "replay_not_found"
    bad_run = httpx.get(f"{base_url}/api/runs/..hidden")
    assert bad_run.status_code == 400 and bad_run.json()["code"] == "invalid_replay_request"
    form = httpx.post(f"{base_url}/api/shop_agent", data={"action": "release_all"})  # the guard refuses it
    assert form.status_code == 415 and form.json()["code"] == "unsupported_media_type"


# ------------------------------------------------------------------------------ no untyped error on a request path
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40) | st.sampled_from(["search[shoes]", "click[buy now]", "rule", "llm", "single_turn",
                                              "action_limit", "multi_turn", "click[next >]", "ask_user[size?]"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
FIELDS = {
    "reset": ("idx", "if_persona", "interaction_mode", "include_private_goal", "wait_timeout", "shopper",
              "shopper_seed", "env_idx"),
    "interact": ("env_idx", "lease_id", "response", "step_index"),
    "terminate": ("env_idx", "lease_id", "termination_reason"),
    "dialogue_transcript": ("env_idx", "lease_id"),
    "release_one": ("env_idx", "lease_id"),
}


@pytest.fixture(scope="module")
def reference_dispatch(world):
    return create_app(world, slots=2, reset_wait_timeout=0.0).state.dispatch


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=st.sampled_from(sorted(FIELDS)), data=st.data())
def test_any_json_in_any_reference_field_gets_a_typed_answer(reference_dispatch, action, data):
    """With no catch-all in the reference dispatcher, any JSON value in any field (after a real reset, so the
    lease is live) is answered from the error table: a bare ValueError/TypeError would escape here."""
    async def run() -> None:
        await reference_dispatch(encode({"action": "release_all"}))
        status, started = await reference_dispatch(encode({"action": "reset", "idx": PERSONA_TASK,
                                                           "shopper": "rule", "interaction_mode": "multi_turn"}))
        assert status == 200, started
        body: dict[str, Any] = {"action": action, "env_idx": started["result"]["env_idx"],
                                "lease_id": started["result"]["lease_id"], "idx": STANDARD_TASK,
                                "response": "search[shoes]", "wait_timeout": 0}
        if action == "reset":
            del body["env_idx"]
        for name in data.draw(st.lists(st.sampled_from(FIELDS[action]), min_size=1, max_size=3, unique=True)):
            body[name] = data.draw(JSON_VALUES, label=name)
        status, payload = await reference_dispatch(json.dumps(body).encode())
        if status != 200:
            assert (payload["code"] in PUBLIC_CODES and status < 500) or payload["code"] == "no_free_slot", payload

    asyncio.run(run())

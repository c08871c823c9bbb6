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
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import EpisodeStateError, LeaseError, RequestError, ServiceError, ShopSimError
from shopsimrl.server import AsyncShopClient, ShopClient, create_app
from shopsimrl.server.http_errors import ERROR_CLASS_OF_CODE, ERROR_TABLE, encode, rebuild, row_of, status_of
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
    assert len(classes) >= 50 and len(modules) > 100 and len(skipped) < 15, (len(classes), len(modules), skipped)


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
# Every error class raised by the env or the server -> (status, code). Written out: this is the wire contract.
EXPECTED = {
    errors.RequestError: (404, "unknown_task"),
    errors.RequestError: (400, "persona_unavailable"),
    errors.RequestError: (400, "dialogue_unavailable"),
    errors.EpisodeStateError: (409, "episode_terminated"),
    errors.EpisodeStateError: (409, "no_active_episode"),
    errors.RequestError: (400, "invalid_request"),
    errors.RequestError: (400, "invalid_action"),
    errors.RequestError: (413, "response_too_long"),
    errors.LeaseError: (409, "stale_lease"),
    errors.LeaseError: (404, "session_not_found"),
    errors.AdmissionError: (503, "no_free_slot"),
    errors.ServiceError: (502, "worker_unavailable"),
    errors.DataError: (503, "data_integrity"),
    errors.DataError: (503, "search_unavailable"),
    errors.RequestError: (400, "invalid_replay_request"),
    errors.RequestError: (404, "replay_not_found"),
    errors.DataError: (400, "bad_request"),
    errors.DataError: (400, "bad_request"),
    errors.DataError: (400, "bad_request"),
    errors.DataError: (400, "invalid_split"),
    errors.ShopSimError: (400, "bad_request"),
}


def _guard_classes() -> dict[type[ShopSimError], tuple[int, str]]:
    from shopsimrl.server import guard

    return {guard.AdmissionError: (413, "body_too_large"), guard.AdmissionError: (421, "host_not_served"),
            guard.AdmissionError: (403, "cross_origin_refused"),
            guard.AdmissionError: (401, "unauthorized"), guard.AdmissionError: (415, "unsupported_media_type"),
            guard.AdmissionError: (400, "invalid_text"), guard.AdmissionError: (400, "nested_too_deep")}


@pytest.mark.parametrize(("error", "expected"), [*EXPECTED.items(), *_guard_classes().items()],
                         ids=lambda value: getattr(value, "__name__", str(value)))
def test_each_error_class_has_one_status_and_code(error, expected):
    row = row_of(error)
    assert (row.status, row.code) == expected
    # exactly one: the table rows among the class's bases form one chain (no two unrelated listed bases,
    # which would make the answer depend on the order of the bases)
    listed = [r.error for r in ERROR_TABLE if issubclass(error, r.error)]
    for a in listed:
        for b in listed:
            assert issubclass(a, b) or issubclass(b, a), f"{error.__name__}: {a.__name__} and {b.__name__}"
    assert status_of(error("x") if error not in (RequestError, RequestError) else error(7)) \
        == expected[0]


def _raised_names(root: Path) -> set[str]:
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                names.add(node.exc.func.id)
    return names


def test_everything_the_env_and_the_server_raise_is_in_the_table():
    """Found by reading every ``raise X(...)`` of env/ and server/: only typed errors, each with its row."""
    from shopsimrl.server import guard

    known = {**{cls.__name__: cls for cls in EXPECTED}, **{cls.__name__: cls for cls in _guard_classes()}}
    raised = _raised_names(SRC / "env") | _raised_names(SRC / "server")
    internal = {"_Abort", "EnvCheckError", "AssertionError", "TypeError", "SystemExit"}
    # AssertionError: the clients' unreachable line; TypeError: row_of on a non-error; SystemExit: a signal;
    # _Abort and EnvCheckError: the conformance checker's own verdicts, never sent over HTTP
    untyped = raised - set(known) - internal - {"ServiceError", "_unreachable"}  # the clients' transport failure
    assert untyped == set(), untyped
    assert {"RequestError", "EpisodeStateError", "LeaseError"} <= raised
    assert guard.AdmissionError.__name__ in raised


def test_codes_name_one_class_each_and_the_clients_rebuild_them():
    codes = [row.code for row in ERROR_TABLE]
    assert len(codes) == len(set(codes)) and len({row.error for row in ERROR_TABLE}) == len(ERROR_TABLE)
    for row in ERROR_TABLE:
        assert ERROR_CLASS_OF_CODE[row.code] is row.error
        rebuilt = rebuild(row.code, "the service's own words")
        assert type(rebuilt) is row.error and str(rebuilt) == "the service's own words"
    assert rebuild("no_such_code", "x") is None


def test_the_contract_documents_the_table_row_for_row():
    doc = (SRC.parent.parent / "docs" / "contract.md").read_text("utf-8")
    section = doc[doc.index('<a id="http-errors"></a>'):doc.index('<a id="health-and-ui"></a>')]
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \| `(\w+)` \|$", section, re.MULTILINE)
    assert rows == [(row.code, str(row.status), row.error.__name__) for row in ERROR_TABLE]


# ---------------------------------------------------------------------------------------------- one behaviour
@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_url(world):
    with serve(create_app(world, slots=4, reset_wait_timeout=5.0)) as url:
        yield url


Call = tuple[str, tuple[Any, ...], dict[str, Any]]

# name -> (calls that must succeed, the bad call, the class all three paths raise)
CASES: dict[str, tuple[list[Call], Call, type[ShopSimError]]] = {
    "unknown task": ([], ("reset", (UNKNOWN_TASK,), {}), RequestError),
    "task id not an integer": ([], ("reset", ("7",), {}), RequestError),
    "persona on a standard task": ([], ("reset", (STANDARD_TASK,), {"persona": True}), RequestError),
    "unknown interaction mode": ([], ("reset", (PERSONA_TASK, None, "three_turn"), {}), RequestError),
    "unknown shopper": ([], ("reset", (PERSONA_TASK,), {"shopper": "robot"}), RequestError),
    "llm shopper": ([], ("reset", (PERSONA_TASK,), {"shopper": "llm"}), RequestError),
    "step before reset": ([], ("step", ("search[x]",), {}), EpisodeStateError),
    "step after the end": ([("reset", (STANDARD_TASK,), {}), ("terminate", (), {})],
                           ("step", ("click[buy now]",), {}), EpisodeStateError),
    "terminate after the end": ([("reset", (STANDARD_TASK,), {}), ("terminate", ("generation_length",), {})],
                                ("terminate", (), {}), EpisodeStateError),
    "unknown termination reason": ([("reset", (STANDARD_TASK,), {})], ("terminate", ("bored",), {}),
                                   RequestError),
    "action not a string": ([("reset", (STANDARD_TASK,), {})], ("step", (123,), {}), RequestError),
    "action missing": ([("reset", (STANDARD_TASK,), {})], ("step", (None,), {}), RequestError),
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
    in_process = _run_sync(ShopEnv(world), calls, bad)
    with ShopClient(base_url) as client:
        sync = _run_sync(client, calls, bad)

    async def run_async() -> BaseException:
        async with AsyncShopClient(base_url) as client:
            return await _run_async(client, calls, bad)

    asynchronous = asyncio.run(run_async())
    for error in (in_process, sync, asynchronous):
        assert type(error) is expected, (case, type(error), error)
    assert str(sync) == str(asynchronous) == str(in_process), case
    if isinstance(in_process, (RequestError, RequestError)):
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
        assert type(error) is LeaseError
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
            assert (payload["code"] in ERROR_CLASS_OF_CODE and status < 500) or payload["code"] == "no_free_slot", payload

    asyncio.run(run())

"""``serve-openenv`` behind the shared edge (server/edge.py), with the real ``openenv`` package (run in
``.venv-openenv`` by tests/test_openenv_venv.py): malformed messages are answered and the session goes on,
foreign pages are refused, idle sockets are reclaimed, and each step's text is bounded."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

openenv = pytest.importorskip("openenv", reason="runs in .venv-openenv (see tests/test_openenv_venv.py)")

from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from live_server import serve  # noqa: E402
from shopsimrl.env import ShopWorld  # noqa: E402
from shopsimrl.openenv import ShopSimAction, ShopSimClient, create_openenv_app  # noqa: E402
from shopsimrl.server._protocol import http_protocol  # noqa: E402
from shopsimrl.server.edge import IDLE_CLOSE_CODE, GuardedApp  # noqa: E402
from shopsimrl.server.guard import Guard  # noqa: E402


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def _app(world, *, slots=2, idle=None, key=None):
    guard = Guard.build(api_key=key)
    return GuardedApp(create_openenv_app(world, slots=slots), guard, max_message_bytes=4096, idle_timeout=idle)


def _ws(url, **kwargs):
    return connect(url.replace("http://", "ws://") + "/ws", open_timeout=10, **kwargs)


def _call(socket, message):
    socket.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(socket.recv(timeout=30))


def _reset(socket, world):
    answer = _call(socket, {"type": "reset", "data": {"task_id": min(world.catalog.goals)}})
    assert answer["type"] == "observation", answer
    return answer


STEP = {"type": "step", "data": {"tool": "search", "arguments": {"query": "红色"}}}


@pytest.mark.parametrize("bad", [
    b"\x00binary", "[1, 2]", "\"text\"", "not json", "{" * 200 + "}" * 200,
    '{"type": "step", "data": {"tool": "search", "arguments": {"query": "\\ud800"}}}',
    json.dumps({"type": "step", "data": {"tool": "search", "arguments": {"query": "x" * 5000}}}),
], ids=["binary", "array", "string", "not-json", "deep", "surrogate", "too-large"])
def test_a_malformed_message_is_answered_and_the_session_goes_on(world, bad):
    with serve(_app(world)) as url, _ws(url) as socket:
        _reset(socket, world)
        answer = _call(socket, bad)
        assert answer["type"] == "error" and answer["data"]["code"] in ("VALIDATION_ERROR", "INVALID_JSON"), answer
        assert _call(socket, STEP)["type"] == "observation"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
TOOLISH = st.sampled_from(["search", "click", "ask_user", "", "rm", "Search", " search"]) | JSON
STEP_DATA = JSON | st.fixed_dictionaries(
    {"tool": TOOLISH}, optional={"arguments": JSON | st.dictionaries(st.sampled_from(["query", "value", "x"]), JSON),
                                 "metadata": JSON, "extra": JSON})
STEP_MESSAGE = st.fixed_dictionaries({"type": st.just("step")}, optional={"data": STEP_DATA, "extra": JSON})
TYPED_ERRORS = {"VALIDATION_ERROR", "EXECUTION_ERROR", "INVALID_JSON"}  # never SESSION_ERROR: that ends the session


def test_any_json_as_a_step_is_answered_and_the_episode_goes_on(world):
    """Whatever a step carries (unknown or empty tools, wrong argument types, extra fields, any JSON), the answer
    is an observation or a typed error, and a valid step in the same session is then played."""
    with serve(_app(world, slots=1)) as url, _ws(url) as socket:

        @settings(max_examples=150, deadline=None)
        @given(STEP_MESSAGE)
        def property_(message):
            _reset(socket, world)
            answer = _call(socket, message)
            assert answer["type"] == "observation" or answer["data"]["code"] in TYPED_ERRORS, answer
            played = _call(socket, STEP)
            assert played["type"] == "observation" and not played["data"]["done"], played

        property_()


@pytest.mark.parametrize("data", [
    {"tool": "rm", "arguments": {}}, {"tool": "", "arguments": {}}, {"tool": 7, "arguments": {}},
    {"tool": "search", "arguments": {"query": 5}}, {"tool": "search", "arguments": "query"},
    {"tool": "click", "arguments": {"value": ["buy now"]}}, {"tool": "search", "arguments": {"query": "x"}, "x": 1},
], ids=["unknown", "empty", "number", "argument-type", "arguments-type", "value-type", "extra-field"])
def test_each_malformed_step_kind_is_a_typed_error(world, data):
    with serve(_app(world, slots=1)) as url, _ws(url) as socket:
        _reset(socket, world)
        answer = _call(socket, {"type": "step", "data": data})
        assert answer["type"] == "error" and answer["data"]["code"] in TYPED_ERRORS - {"INVALID_JSON"}, answer
        if data["tool"] in ("rm", ""):
            assert "unknown tool" in json.dumps(answer["data"]), answer
        assert _call(socket, STEP)["type"] == "observation"


def test_a_step_longer_than_the_action_limit_is_an_error_not_work(world):
    app = GuardedApp(create_openenv_app(world, slots=1), Guard(), max_message_bytes=1 << 20)
    with serve(app) as url, _ws(url) as socket:
        _reset(socket, world)
        begin = time.perf_counter()
        answer = _call(socket, {"type": "step", "data": {"tool": "search", "arguments": {"query": "a " * 300_000}}})
        assert answer["type"] == "error" and "at most 65536" in answer["data"]["message"]
        assert time.perf_counter() - begin < 2.0
        assert _call(socket, STEP)["type"] == "observation"


def test_a_foreign_page_and_a_missing_key_are_refused_at_the_handshake(world):
    with serve(_app(world)) as url:
        with pytest.raises(InvalidStatus) as caught, _ws(url, origin="http://evil.example"):
            pass
        assert caught.value.response.status_code == 403
        rebound = httpx.get(f"{url}/health", headers={"Host": "rebind.example"})
        assert rebound.status_code == 421 and rebound.json()["code"] == "host_not_served"
        posted = httpx.post(f"{url}/reset", content="{}", headers={"Content-Type": "text/plain"})
        assert posted.status_code == 415  # a web page's form post never reaches OpenEnv's routes
    with serve(_app(world, key="k3y")) as url:
        with pytest.raises(InvalidStatus), _ws(url):
            pass
        with _ws(url, additional_headers={"Authorization": "Bearer k3y"}) as socket:
            _reset(socket, world)


HEADER_TIMEOUT = 1.0


def test_an_episode_outlives_every_connection_timeout_over_openenvs_client(world):
    """The header and body timeouts bound the HTTP request, not the WebSocket it upgrades to: an episode held
    over 3x longer, with gaps between steps longer than either timeout, keeps its one session."""
    gap, steps = 1.6 * HEADER_TIMEOUT, 3
    query = ShopSimAction(tool="search", arguments={"query": "红色"})

    async def hold(url):
        async with ShopSimClient(base_url=url) as client:
            begin = time.monotonic()
            await client.reset(task_id=min(world.catalog.goals))
            for _ in range(steps):
                await asyncio.sleep(gap)
                result = await client.step(query)
                assert not result.done and result.observation.page_text
            return await client.state(), time.monotonic() - begin

    protocol = http_protocol(HEADER_TIMEOUT, HEADER_TIMEOUT)
    with serve(_app(world, slots=1, idle=4 * HEADER_TIMEOUT), http=protocol) as url:
        state, held = asyncio.run(hold(url))
    assert held > 3 * HEADER_TIMEOUT
    assert state.step_count == steps and state.task_id == min(world.catalog.goals)  # no silent reconnect


def test_idle_sockets_are_closed_and_their_slots_freed(world):
    with serve(_app(world, slots=1, idle=1.0)) as url:
        first = _ws(url)
        _reset(first, world)
        time.sleep(2.0)
        with pytest.raises(ConnectionClosed) as closed:
            _call(first, STEP)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == IDLE_CLOSE_CODE == 1001
        with _ws(url) as second:  # the only slot is free again
            _reset(second, world)

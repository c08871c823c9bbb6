"""One fuzz suite over the three servers (``serve``, ``policy-server``, ``serve-openenv``): the same malformed
bodies (deep nesting, huge numbers, bad UTF-8, lone surrogates, broken JSON) at every route that reads a body are
a 4xx in that server's JSON error shape, never a 5xx, and the server answers the next valid request.

``serve-openenv`` needs the ``openenv`` extra: in the dev venv its cases are skipped, and
``tests/test_openenv_venv.py`` runs this whole file in ``.venv-openenv``, where none are.
"""

from __future__ import annotations

import importlib.util
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from live_server import serve
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app
from shopsimrl.server.edge import GuardedApp
from shopsimrl.server.guard import MAX_JSON_DEPTH, Guard

HAS_OPENENV = importlib.util.find_spec("openenv") is not None
JSON_TYPE = {"Content-Type": "application/json"}
SLOT = b"@@"  # where a template body takes the malformed value


def _nest(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * depth + b"1" + closer * depth


def _nest_objects(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


# whole bodies, and values put in each route's own fields (SLOT); the same list for every server
MALFORMED_BODIES = {
    "deep-array-1000": _nest(1000), "deep-object-1000": _nest_objects(1000), "deep-array-100k": _nest(100_000),
    f"deep-array-{MAX_JSON_DEPTH + 1}": _nest(MAX_JSON_DEPTH + 1), "bad-utf8": b'{"a": "\xff\xfe"}',
    "overlong-utf8": b'{"a": "\xc0\xaf"}', "encoded-surrogate": b'{"a": "\xed\xa0\x80"}',
    "lone-surrogate": b'{"a": "\\ud800"}', "surrogate-key": b'{"\\udfff": 1}', "truncated": b'{"a": ',
    "not-json": b"hello", "nul": b"\x00", "huge-integer": b"1" + b"0" * 5000, "huge-float": b"1e999999",
}
MALFORMED_VALUES = {
    "huge-integer": b"1" + b"0" * 5000, "huge-float": b"1e999999", "negative-huge-float": b"-1e999999",
    "nan": b"NaN", "infinity": b"Infinity", "deep": _nest(1000), "lone-surrogate": b'"\\udbff"',
    "bad-utf8": b'"\xff"', "encoded-surrogate": b'"\xed\xb0\x80"', "float-for-int": b"0.5",
    "bool-for-int": b"true", "object": b'{"a": [1]}',
}


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def _openenv_app(world):
    from shopsimrl.openenv import create_openenv_app

    return GuardedApp(create_openenv_app(world, slots=2), Guard(open_paths=frozenset({"/health"})))


def _servers(world, tmp_path_factory):
    """name -> (app, [(route, template body with SLOT)], health route)."""
    chat = (b'{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": '
            b'{"name": "search", "parameters": {"type": "object"}}}], "shopsim_task_id": @@}')
    servers = {
        "serve": (create_app(world, slots=2, reset_wait_timeout=0.5, runs_dir=str(tmp_path_factory.mktemp("runs"))),
                  [("/api/shop_agent", b'{"action": "interact", "env_idx": @@, "lease_id": "nope", "response": "x"}'),
                   ("/v1/sessions", b'{"task_id": @@, "persona": "maybe"}'),  # never valid: no slot is leased
                   ("/v1/sessions/nope/step", b'{"action": @@}')], "/healthz"),
        "policy-server": (GuardedApp(create_policy_app(world, policy="oracle"), Guard()),
                          [("/v1/chat/completions", chat)], "/healthz"),
    }
    if HAS_OPENENV:
        servers["serve-openenv"] = (_openenv_app(world), [("/reset", b'{"task_id": @@}'),
                                                          ("/step", b'{"action": {"tool": "search", "arguments": '
                                                                    b'{"query": @@}}}')], "/health")
    return servers


SERVER_NAMES = ["serve", "policy-server", pytest.param("serve-openenv", marks=pytest.mark.skipif(
    not HAS_OPENENV, reason="runs in .venv-openenv (see tests/test_openenv_venv.py)"))]


@pytest.fixture(scope="module")
def running(world, tmp_path_factory):
    """Every server started once for the module: name -> (url, routes, health route)."""
    started = {}
    stack = []
    for name, (app, routes, health) in _servers(world, tmp_path_factory).items():
        context = serve(app)
        started[name] = (context.__enter__(), routes, health)
        stack.append(context)
    yield started
    for context in reversed(stack):
        context.__exit__(None, None, None)


def _assert_typed_4xx(answer: httpx.Response, what: str) -> None:
    assert 400 <= answer.status_code < 500, (what, answer.status_code, answer.text[:300])
    payload = answer.json()
    assert isinstance(payload, dict) and ({"error", "detail"} & set(payload)), (what, payload)


def _post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url, content=body, headers=JSON_TYPE, timeout=30)


@pytest.mark.parametrize("server", SERVER_NAMES)
@pytest.mark.parametrize("case", sorted(MALFORMED_BODIES))
def test_a_malformed_body_is_a_typed_4xx_on_every_route(running, server, case):
    url, routes, health = running[server]
    for route, _ in routes:
        _assert_typed_4xx(_post(url + route, MALFORMED_BODIES[case]), f"{server} {route} {case}")
    assert httpx.get(url + health).status_code == 200


@pytest.mark.parametrize("server", SERVER_NAMES)
@pytest.mark.parametrize("case", sorted(MALFORMED_VALUES))
def test_a_malformed_value_in_a_field_is_a_typed_4xx(running, server, case):
    url, routes, _ = running[server]
    for route, template in routes:
        answer = _post(url + route, template.replace(SLOT, MALFORMED_VALUES[case]))
        _assert_typed_4xx(answer, f"{server} {route} {case}")


@pytest.mark.parametrize("server", SERVER_NAMES)
def test_nesting_within_the_limit_reaches_the_route(running, server):
    """The bound refuses only what is deeper than ``MAX_JSON_DEPTH``: a body at the limit gets the route's own
    answer (here a typed 4xx about its fields, not ``nested_too_deep``)."""
    url, routes, _ = running[server]
    for route, template in routes:
        inner = _nest(MAX_JSON_DEPTH - template.count(b"{") - template.count(b"["))
        answer = _post(url + route, template.replace(SLOT, inner))
        assert answer.status_code < 500 and "nested_too_deep" not in answer.text, (route, answer.text[:300])


NASTY = st.sampled_from(sorted(MALFORMED_VALUES.values())) | st.binary(max_size=40) | st.builds(
    lambda depth, opener: _nest(depth, *opener), st.integers(0, 3000), st.sampled_from([(b"[", b"]"), (b"{", b"}")]))


@pytest.mark.parametrize("server", SERVER_NAMES)
def test_fuzzed_bodies_never_answer_5xx(running, server):
    """Random bytes in each route's field, or a random cut of its body: never a 5xx, always a JSON answer."""
    url, routes, health = running[server]

    @settings(max_examples=120, deadline=None)
    @given(st.sampled_from(routes), NASTY, st.integers(0, 400))
    def property_(route, value, cut):
        path, template = route
        body = template.replace(SLOT, value)
        for sent in (body, body[:cut]):
            answer = _post(url + path, sent)
            assert answer.status_code < 500, (path, sent[:200], answer.status_code, answer.text[:300])
            json.loads(answer.content)

    property_()
    assert httpx.get(url + health).status_code == 200

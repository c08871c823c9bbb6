"""The shared edge (server/edge.py) on every server command: policy-server and serve-openenv refuse what serve
refuses, and a slow client cannot hold a connection past the header and body timeouts."""

from __future__ import annotations

import os
import resource
import socket
import time

import httpx
import pytest

from live_server import serve, serve_command
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.cli import main
from shopsimrl.env import ShopWorld
from shopsimrl.server.edge import GuardedApp
from shopsimrl.server.guard import Guard


@pytest.fixture(scope="module")
def policy_url(prepared_dir):
    app = GuardedApp(create_policy_app(ShopWorld.shared(prepared_dir)), Guard.build(api_key="s3cret"))
    with serve(app) as url:
        yield url


AUTH = {"Authorization": "Bearer s3cret"}


def test_policy_server_refuses_foreign_pages_and_keyless_calls(policy_url):
    chat = f"{policy_url}/v1/chat/completions"
    body = '{"messages": [{"role": "user", "content": "hi"}]}'
    answers = {
        "foreign host": httpx.post(chat, content=body, headers={**AUTH, "Host": "evil.example",
                                                                "Content-Type": "text/plain"}),
        "form post": httpx.post(chat, content=body, headers={**AUTH, "Content-Type": "text/plain"}),
        "other origin": httpx.post(chat, content=body, headers={**AUTH, "Origin": "http://evil.example",
                                                                "Content-Type": "application/json"}),
        "no key": httpx.post(chat, content=body, headers={"Content-Type": "application/json"}),
        "surrogate": httpx.post(chat, content='{"messages": [{"role": "user", "content": "\\ud800"}]}',
                                headers={**AUTH, "Content-Type": "application/json"}),
    }
    expected = {"foreign host": (421, "host_not_served"), "form post": (415, "unsupported_media_type"),
                "other origin": (403, "cross_origin_refused"), "no key": (401, "unauthorized"),
                "surrogate": (400, "invalid_text")}
    for name, answer in answers.items():
        assert (answer.status_code, answer.json()["code"]) == expected[name], (name, answer.text)
    assert httpx.get(f"{policy_url}/v1/models", headers=AUTH).status_code == 200
    assert httpx.get(f"{policy_url}/healthz").status_code == 200  # liveness without the key


def test_an_allowed_preflight_is_answered_not_refused(prepared_dir):
    """A CORS preflight from a listed origin is a 204 answer (guard.Preflight), without a body, and leaves the
    connection open; from any other origin it is refused like any request."""
    app = GuardedApp(create_policy_app(ShopWorld.shared(prepared_dir)),
                     Guard.build(api_key="s3cret", cors_origins=["https://lab.example"]))
    ask = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
    with serve(app) as url, httpx.Client() as client:
        answer = client.options(f"{url}/v1/chat/completions", headers={**ask, "Origin": "https://lab.example"})
        assert answer.status_code == 204 and answer.content == b""
        assert answer.headers["access-control-allow-origin"] == "https://lab.example"
        assert "authorization" in answer.headers["access-control-allow-headers"]
        assert answer.headers.get("connection") != "close"
        refused = client.options(f"{url}/v1/chat/completions", headers={**ask, "Origin": "https://evil.example"})
        assert (refused.status_code, refused.json()["code"]) == (403, "cross_origin_refused")


@pytest.mark.parametrize("command", ["policy-server", "serve-openenv", "serve"])
def test_every_server_refuses_a_non_loopback_bind_without_a_key(prepared_dir, command, capsys, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert main([command, "--data", str(prepared_dir), "--host", "0.0.0.0"]) == 2
    assert "--api-key-env" in capsys.readouterr().err
    assert main([command, "--data", str(prepared_dir), "--api-key-env", "NO_SUCH_KEY_VAR"]) == 2
    assert "unset or empty" in capsys.readouterr().err


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.fixture
def slow_server(prepared_dir):
    port = _port()
    env = {**os.environ, "SLOW_TEST_KEY": "k"}
    with serve_command(["serve", "--data", str(prepared_dir), "--port", str(port), "--header-timeout", "1",
                        "--body-timeout", "2", "--log-level", "critical"], port=port,
                       preexec_fn=_low_fd_limit, env=env):
        yield port


def test_slow_bodies_are_cut_off_and_new_clients_get_in(slow_server):
    """400 clients (more than the server's 256 file descriptors) send their headers and a byte of a 1,000-byte
    body, then nothing: the body timeout closes them, and the service answers again within seconds."""
    head = (b"POST /api/shop_agent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{")
    slow = []
    for _ in range(400):
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", slow_server))
            sock.sendall(head)
        except OSError:
            sock.close()
            continue
        slow.append(sock)
    assert len(slow) > 256
    start = time.monotonic()
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{slow_server}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() - start < 30, "the service stayed unreachable"
        time.sleep(0.2)
    closed = 0
    for sock in slow[:50]:  # the first ones were accepted: the server has closed them
        try:
            closed += sock.recv(1) == b""
        except OSError:
            closed += 1
        sock.close()
    for sock in slow[50:]:
        sock.close()
    assert closed == 50


def test_a_keyless_request_is_refused_before_its_body(prepared_dir, monkeypatch):
    from shopsimrl.server import create_app

    app = create_app(ShopWorld.shared(prepared_dir), slots=1, guard=Guard.build(api_key="k"))
    with serve(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /api/shop_agent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n")
            answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 401") and b"connection: close" in answer.lower()

"""A client that half-closes after its request (``shutdown(SHUT_WR)``) is answered, by one process and by the
``--workers`` front alike; a reset that must queue leaves the queue at the end of its client's input, with an
answer (server/_protocol.py, leases.CLIENT_EOF)."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from live_server import free_port, serve, serve_command
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app
from shopsimrl.server._protocol import http_protocol


def _half_closed(url: str, method: str, path: str, body: bytes = b"") -> tuple[int, dict]:
    """Send one request, shut the write side, read the whole answer (the server closes after it)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        sock.sendall(head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    if not answer:
        return 0, {}
    head_part, _, payload = answer.partition(b"\r\n\r\n")
    return int(head_part.split(b" ", 2)[1]), json.loads(payload) if payload else {}


def _mixed_requests(count: int) -> list[tuple[str, str, bytes]]:
    """Health checks, resets with a free slot, steps on unknown sessions, task lists: each has an answer."""
    kinds = [("GET", "/healthz", b""), ("POST", "/api/shop_agent", b'{"action": "reset", "idx": 0}'),
             ("POST", "/api/shop_agent", b'{"action": "release_all"}'), ("GET", "/v1/tasks?limit=2", b""),
             ("POST", "/v1/sessions/00nope/step", b'{"action": "search[x]"}')]
    return [kinds[i % len(kinds)] for i in range(count)]


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


def test_one_process_answers_every_half_closed_request(world):
    with serve(create_app(world, slots=4), http=http_protocol()) as url:
        statuses = [_half_closed(url, *request)[0] for request in _mixed_requests(40)]
    assert 0 not in statuses and all(status < 500 for status in statuses), statuses


def test_a_queued_reset_leaves_the_queue_at_its_clients_end_of_input_with_an_answer(world):
    with serve(create_app(world, slots=1), http=http_protocol()) as url, httpx.Client(base_url=url) as http:
        holder = http.post("/api/shop_agent", json={"action": "reset", "idx": 0}).json()["result"]
        for path, body in (("/api/shop_agent", b'{"action": "reset", "idx": 1}'), ("/v1/sessions", b'{"task_id": 2}')):
            status, payload = _half_closed(url, "POST", path, body)
            assert (status, payload.get("code")) == (503, "no_free_slot") and "ended its input" in payload["error"]
        health = http.get("/healthz").json()
        assert health["waiting_resets"] == 0 and health["live_sessions"] == 1  # no ghost holds the next slot
        http.post("/api/shop_agent", json={"action": "release_one", "env_idx": holder["env_idx"],
                                           "lease_id": holder["lease_id"]})
        assert http.get("/healthz").json()["free_slots"] == 1


@pytest.fixture(scope="module")
def front(prepared_dir):
    port = free_port()
    with serve_command(["serve", "--data", str(prepared_dir), "--port", str(port), "--workers", "2", "--slots", "2"],
                       port=port):
        yield f"http://127.0.0.1:{port}"


def test_the_workers_front_answers_every_half_closed_request(front):
    statuses = [_half_closed(front, *request)[0] for request in _mixed_requests(40)]
    assert 0 not in statuses and all(status < 500 for status in statuses), statuses


def test_the_front_relays_the_end_of_input_to_a_queued_reset(front, world):
    task = min(world.catalog.goals)
    with httpx.Client(base_url=front) as http:
        http.post("/api/shop_agent", json={"action": "release_all"})
        held = [http.post("/v1/sessions", json={"task_id": task}).json() for _ in range(2)]
        assert all("session_id" in session for session in held), held
        status, payload = _half_closed(front, "POST", "/v1/sessions", b'{"task_id": %d}' % task)
        assert (status, payload.get("code")) == (503, "no_free_slot"), payload
        assert http.get("/healthz").json()["waiting_resets"] == 0
        http.post("/api/shop_agent", json={"action": "release_all"})
        assert http.get("/healthz").json()["free_slots"] == 2

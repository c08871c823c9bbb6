"""The edge of ``serve`` (single process and ``--workers``): the event loop keeps answering while a client sends
maximal searches, and text that is not Unicode is a typed 4xx that leaves the session usable."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from error_kinds import raises_kind

MAX_CHARS = 65_536


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(prepared_dir, *extra: str):
    port = _port()
    process = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", "serve", "--data", str(prepared_dir),
                                "--port", str(port), "--slots", "4", "--log-level", "warning", *extra])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return base, process
        except httpx.TransportError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
        time.sleep(0.1)


@pytest.fixture(scope="module", params=["single", "workers"])
def server(request, prepared_dir):
    base, process = _start(prepared_dir, *(("--workers", "2") if request.param == "workers" else ()))
    yield base
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(autouse=True)
def _free_slots(request):
    """Every test starts with all slots free (the server is shared by the module's tests)."""
    yield
    if "server" in request.fixturenames:
        httpx.post(f"{request.getfixturevalue('server')}/api/shop_agent", json={"action": "release_all"})


def maximal_search(seed: int) -> str:
    words = " ".join(f"w{seed}q{i} 红色{i % 97}" for i in range(MAX_CHARS // 12))
    return ("search[" + words)[: MAX_CHARS - 1] + "]"


def _reset(client: httpx.Client, task: int = 0) -> dict:
    answer = client.post("/api/shop_agent", json={"action": "reset", "idx": task})
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def _task(base: str) -> int:
    return httpx.get(f"{base}/v1/tasks").json()["tasks"][0]["task_id"]


SEARCHER = """
import sys, httpx
base, task, chars = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def reset(client):
    return client.post("/api/shop_agent", json={"action": "reset", "idx": task}).json()["result"]
with httpx.Client(base_url=base, timeout=60) as client:
    lease, i = reset(client), 0
    while True:
        words = " ".join(f"w{i}q{j} 红色{j % 97}" for j in range(chars // 12))
        body = {"action": "interact", "env_idx": lease["env_idx"], "lease_id": lease["lease_id"],
                "response": ("search[" + words)[: chars - 1] + "]"}
        answer = client.post("/api/shop_agent", json=body)
        assert answer.status_code == 200, answer.text
        print("sent", flush=True)
        if answer.json()["result"]["done"]:
            client.post("/api/shop_agent", json={"action": "release_one", "env_idx": lease["env_idx"],
                                                 "lease_id": lease["lease_id"]})
            lease = reset(client)
        i += 1
"""


def test_healthz_p99_stays_low_while_a_client_sends_maximal_searches(server):
    """A client (its own process) sends 64K-character searches back to back; /healthz is probed meanwhile."""
    searcher = subprocess.Popen([sys.executable, "-c", SEARCHER, server, str(_task(server)), str(MAX_CHARS)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert searcher.stdout is not None and searcher.stdout.readline() == "sent\n"  # the searches are under way
        latencies = []
        with httpx.Client(base_url=server, timeout=10) as probe:
            end = time.monotonic() + 8
            while time.monotonic() < end:
                begin = time.perf_counter()
                assert probe.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - begin)
                time.sleep(0.02)
        assert searcher.poll() is None, "the searcher failed"
    finally:
        searcher.kill()
        searcher.wait()
        httpx.post(f"{server}/api/shop_agent", json={"action": "release_all"})
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    print(f"/healthz p99 {p99 * 1000:.1f} ms, median {latencies[len(latencies) // 2] * 1000:.1f} ms "
          f"over {len(latencies)} probes")
    assert p99 <= 0.100


SURROGATE = '{"action":"search[\\ud800]"}'


def test_a_lone_surrogate_is_a_typed_400_and_the_session_stays_usable(server):
    task = _task(server)
    with httpx.Client(base_url=server, timeout=30) as client:
        created = client.post("/v1/sessions", json={"task_id": task})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        bad = client.post(f"/v1/sessions/{sid}/step", content=SURROGATE, headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_text", bad.text
        assert client.get(f"/v1/sessions/{sid}").status_code == 200
        good = client.post(f"/v1/sessions/{sid}/step", json={"action": "search[红色]"})
        assert good.status_code == 200, good.text
        lease = _reset(client, task)
        raw = ('{"action":"interact","env_idx":' + str(lease["env_idx"]) + ',"lease_id":"' + lease["lease_id"]
               + '","response":"search[\\udfff x]"}')
        bad = client.post("/api/shop_agent", content=raw, headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_text", bad.text
        body = {"action": "interact", "env_idx": lease["env_idx"], "lease_id": lease["lease_id"], "response": "search[红色]"}
        assert client.post("/api/shop_agent", json=body).status_code == 200
        keyed = client.post("/v1/sessions", content='{"task_id": ' + str(task) + ', "\\udc00": 1}',
                            headers={"content-type": "application/json"})
        assert keyed.status_code == 400 and keyed.json()["code"] == "invalid_text"
        assert client.get("/healthz").status_code == 200


def test_valid_pairs_and_escaped_backslashes_are_text(server):
    task = _task(server)
    with httpx.Client(base_url=server, timeout=30) as client:
        sid = client.post("/v1/sessions", json={"task_id": task}).json()["session_id"]
        for raw in ('{"action":"search[\\ud83d\\ude00 红色]"}', '{"action":"search[\\\\ud800]"}'):
            answer = client.post(f"/v1/sessions/{sid}/step", content=raw, headers={"content-type": "application/json"})
            assert answer.status_code == 200, answer.text


def test_in_process_steps_refuse_lone_surrogates(prepared_dir):
    from shopsimrl.env import ShopWorld
    from shopsimrl.errors import RequestError

    world = ShopWorld.shared(prepared_dir)
    env = world.new_env()
    env.reset(min(world.catalog.goals))
    with raises_kind(RequestError, "invalid_action", match="lone surrogate"):
        env.step("search[\ud800]")
    assert env.step("search[红色]")["observation"]


def _upgrade_status(base: str, path: str) -> int:
    """The status of a WebSocket handshake to ``path`` (raw HTTP: the server must answer it, not fail)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        return int(sock.recv(4096).split(b" ", 2)[1])


def test_workers_answer_like_the_single_process(server):
    """The same statuses in both modes for numeric env_idx forms and WebSocket upgrades (D10)."""
    task = _task(server)
    with httpx.Client(base_url=server, timeout=30) as client:
        leases = [_reset(client, task) for _ in range(4)]  # every slot: both workers hold some
        try:
            for lease in leases:
                for form in (lease["env_idx"], float(lease["env_idx"])):
                    body = {"action": "interact", "env_idx": form, "lease_id": lease["lease_id"],
                            "response": "search[红色]"}
                    answer = client.post("/api/shop_agent", json=body)
                    assert answer.status_code == 200, (form, answer.text)
                body = {"action": "interact", "env_idx": lease["env_idx"] + 0.5, "lease_id": lease["lease_id"],
                        "response": "search[红色]"}
                assert client.post("/api/shop_agent", json=body).status_code == 400
        finally:
            client.post("/api/shop_agent", json={"action": "release_all"})
    for path in ("/api/shop_agent", "/v1/sessions", "/healthz", "/nowhere"):
        assert _upgrade_status(server, path) == 403, path

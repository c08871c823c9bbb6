"""The UIs cannot be framed or run inline script (CSP, X-Frame-Options), the replay API shows no absolute path, and
a hard link inside a run directory is refused like a symlink that leads outside it."""

from __future__ import annotations

import os

import httpx
import pytest

from live_server import serve
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app
from shopsimrl.server.replay import RunsStore


@pytest.fixture(scope="module")
def url(prepared_dir, tmp_path_factory):
    runs = tmp_path_factory.mktemp("ui") / "runs"
    runs.mkdir()
    with serve(create_app(ShopWorld.shared(prepared_dir), slots=1, runs_dir=runs)) as base:
        yield base


@pytest.mark.parametrize("path", ["/debug-ui", "/replay-ui/", "/debug-ui/app.js", "/debug-ui/replay.css"])
def test_ui_pages_forbid_framing_and_inline_script(url, path):
    answer = httpx.get(url + path)
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert answer.headers["x-frame-options"] == "DENY" and answer.headers["x-content-type-options"] == "nosniff"


def test_the_runs_root_is_never_shown_as_an_absolute_path(url, tmp_path):
    root = httpx.get(f"{url}/api/runs").json()["runs_root"]
    assert not os.path.isabs(root) and root == "runs"
    assert RunsStore("runs").list_runs()["runs_root"] == "runs"


def test_hard_links_are_refused_like_outside_symlinks(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}', "utf-8")
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    os.link(secret, run / "manifest.json")
    (run / "summary.json").write_text('{"ok": true}', "utf-8")
    shown = RunsStore(tmp_path / "runs").run("x")
    assert shown["manifest"] is None and "hard link" in shown["artifacts"]["manifest.json"]["refused"]
    assert shown["artifact_summary"] == {"ok": True}

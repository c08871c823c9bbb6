"""/docs uses only local assets (item 8; the browser suite checks it renders offline); /v1 body type messages (item 4)."""

from __future__ import annotations

import re

import httpx

from live_server import serve
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app


def test_docs_page_and_its_assets_come_from_this_server(prepared_dir):
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=1)) as url:
        page = httpx.get(f"{url}/docs")
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(source.startswith("/") for source in sources), sources
        assert "cdn" not in page.text.lower()
        for source in sources:
            asset = httpx.get(f"{url}{source}")
            assert asset.status_code == 200 and len(asset.content) > 1000, source
        assert httpx.get(f"{url}/openapi.json").json()["paths"]["/v1/sessions"]


def test_v1_body_without_json_content_type_says_what_to_send(prepared_dir):
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=1)) as url:
        body = '{"task_id": 0}'
        form = httpx.post(f"{url}/v1/sessions", content=body,
                          headers={"Content-Type": "application/x-www-form-urlencoded"})  # what curl -d sends
        assert form.status_code == 415
        assert "Content-Type: application/json" in form.json()["error"]
        assert "x-www-form-urlencoded" in form.json()["error"]
        created = httpx.post(f"{url}/v1/sessions", content=body, headers={"Content-Type": "application/json"})
        assert created.status_code == 201
        assert httpx.delete(f"{url}/v1/sessions/{created.json()['session_id']}").status_code in (200, 204)

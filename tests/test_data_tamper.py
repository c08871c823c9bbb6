"""A data directory edited together with its manifest: every file opening reads must be listed, arrays must fit
together, and a corrupt record found while serving is a typed ``DataError`` (``data_integrity``) on every API (never a 500)."""

from __future__ import annotations

import hashlib
import json
import shutil

import httpx
import numpy as np
import pytest

from error_kinds import raises_kind
from live_server import serve
from shopsimrl.catalog.store import Catalog, opened_files
from shopsimrl.env import ShopWorld
from shopsimrl.errors import DataError
from shopsimrl.server import create_app


@pytest.fixture
def data(prepared_dir, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(prepared_dir, out)
    (out / ".verified.json").unlink(missing_ok=True)
    return out


def _rehash(root, name):
    """Write ``name``'s new SHA-256 and size into the manifest, as someone covering an edit would."""
    manifest = json.loads((root / "manifest.json").read_text())
    payload = (root / name).read_bytes()
    manifest["files"][name] = hashlib.sha256(payload).hexdigest()
    manifest["file_sizes"][name] = len(payload)
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / ".verified.json").unlink(missing_ok=True)


def test_every_opened_file_is_listed_by_prepare(data):
    manifest = json.loads((data / "manifest.json").read_text())
    assert set(opened_files(manifest)) <= set(manifest["files"])
    for path in data.rglob("*"):
        if path.is_file() and not path.name.startswith(".") and path.name != "manifest.json":
            assert path.relative_to(data).as_posix() in opened_files(manifest), path


@pytest.mark.parametrize("name", ["records/goals.jsonl", "search/postings_pair_docs.npy", "task_splits.json",
                                  "products.sqlite3"])
def test_a_file_dropped_from_the_manifest_is_refused(data, name):
    manifest = json.loads((data / "manifest.json").read_text())
    del manifest["files"][name], manifest["file_sizes"][name]
    (data / "manifest.json").write_text(json.dumps(manifest))
    with (data / name).open("r+b") as handle:  # and the file is corrupt
        handle.seek(8)
        handle.write(b"\xff\xff\xff\xff")
    with raises_kind(DataError, "data_integrity", match="does not list"):
        Catalog.from_data_dir(data)


def test_truncated_postings_rehashed_into_the_manifest_are_refused(data):
    path = data / "search" / "postings_pair_docs.npy"
    docs = np.load(path)
    np.save(path, docs[: docs.size - 3])
    _rehash(data, "search/postings_pair_docs.npy")
    with raises_kind(DataError, "search_unavailable", match="inconsistent"):
        ShopWorld.from_data_dir(data)


def _corrupt_goal(root) -> int:
    """Overwrite one goal line with bytes of the same length that are not JSON; returns its task id."""
    path = root / "records" / "goals.jsonl"
    lines = path.read_bytes().split(b"\n")
    task_id = json.loads(lines[1])["task_id"]
    lines[1] = b"#" * len(lines[1])
    path.write_bytes(b"\n".join(lines))
    _rehash(root, "records/goals.jsonl")
    return task_id


def test_a_corrupt_goal_is_a_typed_error_in_process_and_on_both_apis(data):
    task_id = _corrupt_goal(data)
    world = ShopWorld.from_data_dir(data)
    with raises_kind(DataError, "data_integrity", match=r"goals\.jsonl: record 1"):
        world.new_env().reset(task_id)
    with serve(create_app(world, slots=2)) as url, httpx.Client(base_url=url, timeout=30) as client:
        answers = [client.post("/api/shop_agent", json={"action": "reset", "idx": task_id}),
                   client.post("/v1/sessions", json={"task_id": task_id})]
        for answer in answers:
            assert answer.status_code == 503 and answer.json()["code"] == "data_integrity", answer.text
            assert "goals.jsonl: record 1" in answer.json()["error"]
        assert client.get("/healthz").json()["free_slots"] == 2  # no slot kept by the failed resets
        other = next(t for t in sorted(world.catalog.goals) if t != task_id)
        assert client.post("/v1/sessions", json={"task_id": other}).status_code == 201

"""Shared fixtures: the hand-written fixture catalog and a prepared data directory built from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
FIXTURE_ARCHIVE = DATA / "fixture_catalog.json"


@pytest.fixture(scope="session")
def fixture_records() -> list[dict]:
    return json.loads(FIXTURE_ARCHIVE.read_text("utf-8"))


@pytest.fixture(scope="session")
def prepared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shopsimrl.catalog import PrepareOptions, prepare_dataset

    out = tmp_path_factory.mktemp("prepared") / "fixture"
    prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2))
    return out

"""``prepare`` never builds an empty catalog, so it never replaces a good one with one, and names only the user's paths."""

from __future__ import annotations

from pathlib import Path

from error_kinds import raises_kind
from shopsimrl.catalog import PrepareOptions, prepare_dataset
from shopsimrl.catalog.store import Catalog
from shopsimrl.cli import main
from shopsimrl.errors import DataError

FIXTURE_ARCHIVE = Path(__file__).parent / "data" / "fixture_catalog.json"


def test_an_archive_without_products_is_refused(tmp_path, capsys):
    archive = tmp_path / "empty.json"
    archive.write_text("[]")
    out = tmp_path / "out"
    with raises_kind(DataError, "dataset_build") as caught:
        prepare_dataset(archive, out)
    assert ".prepare-building" not in str(caught.value)
    assert not out.exists() or not any(out.iterdir())
    assert main(["data", "prepare", "--archive", str(archive), "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert ".prepare-building" not in err and str(archive) in err


def test_force_never_replaces_a_good_catalog_with_an_empty_one(tmp_path, capsys):
    out = tmp_path / "good"
    prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2))
    manifest = (out / "manifest.json").read_bytes()
    archive = tmp_path / "empty.json"
    archive.write_text("[]")
    assert main(["data", "prepare", "--archive", str(archive), "--out", str(out), "--force"]) != 0
    err = capsys.readouterr().err
    assert "no products" in err and ".prepare-building" not in err
    assert (out / "manifest.json").read_bytes() == manifest
    assert len(Catalog.from_data_dir(out).goals) > 0
    assert not (out / ".prepare-building").exists()

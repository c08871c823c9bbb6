"""The prepare pipeline end to end on the fixture catalog (issue 2 items 3-5, 8)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.catalog import Catalog, PrepareOptions, prepare_dataset
from shopsimrl.cli import main
from shopsimrl.errors import DataError

FIXTURE_ARCHIVE = Path(__file__).parent / "data" / "fixture_catalog.json"


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_outputs_and_manifest(prepared_dir):
    manifest = json.loads((prepared_dir / "manifest.json").read_text("utf-8"))
    stats = manifest["stats"]
    assert stats["source_product_count"] == 17
    assert stats["excluded_product_count"] == 1 and stats["cleaned_product_count"] == 16
    assert stats["persona_task_count"] == 9
    assert stats["inactive_instruction_count"] == 1  # the instruction without attributes
    assert stats["active_task_count"] == 15
    assert stats["split_sizes"] == {"test": 2, "val": 2, "train": 5}
    assert manifest["source_archive_sha256"] == _sha(FIXTURE_ARCHIVE)
    archive = prepared_dir / "products.json.gz"
    assert manifest["output_archive_sha256"] == _sha(archive)
    data = gzip.decompress(archive.read_bytes())
    assert manifest["output_data_sha256"] == hashlib.sha256(data).hexdigest()
    assert archive.read_bytes()[4:8] == b"\x00\x00\x00\x00"  # gzip mtime 0
    exclusions = json.loads((prepared_dir / "exclusions.json").read_text("utf-8"))
    assert exclusions == [{
        "asin": "932040992888", "price_affecting_axes": ["尺码", "颜色分类"],  # the fixture keeps sorted axes
        "reason": "multiple_price_affecting_axes", "source_product_index": 6, "task_ids": [6],
    }]
    for name, sha in manifest["files"].items():
        assert _sha(prepared_dir / name) == sha, name


def test_task_ids_keep_gaps_and_budgets_are_audited(prepared_dir):
    catalog = Catalog.from_data_dir(prepared_dir)
    assert 6 not in catalog.goals and 16 not in catalog.goals  # excluded product, inactive instruction
    assert sorted(catalog.goals) == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    budgets = {row["task_id"]: row for row in json.loads((prepared_dir / "budgets.json").read_text("utf-8"))}
    assert budgets[0]["price_upper"] == 1200.0  # 价格在1000到1200元之间
    assert budgets[12]["source"] == "none" and budgets[12]["price_upper"] is None
    splits = catalog.split("test") + catalog.split("val") + catalog.split("train")
    assert sorted(splits) == sorted(t for t in catalog.goals if catalog.goals[t]["user_persona"])
    assert len(catalog.split("standard")) == 6
    with raises_kind(DataError, "invalid_split", match="unknown task split 'nope'"):
        catalog.split("nope")


def test_prepare_is_deterministic_idempotent_and_refuses_overwrite(tmp_path, prepared_dir):
    out = tmp_path / "again"
    first = prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2))
    for name in ("products.json.gz", "exclusions.json", "persona_splits.json", "task_splits.json", "budgets.json"):
        assert (out / name).read_bytes() == (prepared_dir / name).read_bytes(), name
    again = prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2))
    assert again["up_to_date"] is True and again["output_data_sha256"] == first["output_data_sha256"]
    with raises_kind(DataError, "dataset_build", match="--force"):
        prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=1, val_size=1))
    rebuilt = prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=1, val_size=1), force=True)
    assert rebuilt["stats"]["split_sizes"] == {"test": 1, "val": 1, "train": 7}


def test_source_is_never_written_and_cleaned_archive_is_accepted(tmp_path, prepared_dir):
    source = tmp_path / "src.json"
    shutil.copy(FIXTURE_ARCHIVE, source)
    before = source.read_bytes()
    prepare_dataset(source, tmp_path / "out", options=PrepareOptions(test_size=2, val_size=2))
    assert source.read_bytes() == before
    # the cleaned archive goes through prepare again with the same ids and data
    again = prepare_dataset(prepared_dir / "products.json.gz", tmp_path / "out2", options=PrepareOptions(2, 2))
    original = json.loads((prepared_dir / "manifest.json").read_text("utf-8"))
    assert again["output_data_sha256"] == original["output_data_sha256"]


def test_annotations_override_text_budget(tmp_path):
    annotations = tmp_path / "ann.json"
    annotations.write_text(json.dumps([{
        "task_id": 0, "asin": "824100258497", "source_field": "instruction_simple",
        "evidence": "价格在1000到1200元之间", "kind": "hard_upper", "amount": 1100.0,
        "approximate_upper_multiplier": None, "price_upper": 1100.0,
    }], ensure_ascii=False), "utf-8")
    out = tmp_path / "annotated"
    prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2, annotations=annotations))
    catalog = Catalog.from_data_dir(out)
    assert catalog.goals[0]["price_upper"] == 1100.0


def _annotation(task_id: int, **identity: str) -> dict:
    return {"task_id": task_id, **identity, "source_field": "instruction_simple", "evidence": "价格在1000元以内",
            "kind": "hard_upper", "amount": 1000.0, "approximate_upper_multiplier": None, "price_upper": 1000.0}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([_annotation(0, asin="824100258497"), _annotation(1, asin="747848614498")],
         "1 of 2 records mismatch: task_id 1: annotation asin 747848614498 != archive asin 824100258498"),
        ([_annotation(0, task_uid="shopsim-4d2aafa3d1d4b42a5c7da9c6")], "task_id 0: annotation task_uid"),
        ([_annotation(9999)], "task_id 9999 is not a task of this archive"),
    ],
)
def test_annotations_of_another_archive_are_refused(tmp_path, capsys, records, message):
    annotations = tmp_path / "ann.json"
    annotations.write_text(json.dumps(records, ensure_ascii=False), "utf-8")
    out = tmp_path / "annotated"
    code = main(["data", "prepare", "--archive", str(FIXTURE_ARCHIVE), "--out", str(out), "--test-size", "2",
                 "--val-size", "2", "--annotations", str(annotations)])
    assert code == 2
    err = capsys.readouterr().err
    assert "do not belong to this archive" in err and message in err
    assert not (out / "manifest.json").exists()


def test_annotations_with_the_archives_own_uid_are_applied(tmp_path):
    from shopsimrl.catalog.archive import load_archive
    from shopsimrl.catalog.cleaning import clean_products

    products, _ = load_archive(FIXTURE_ARCHIVE)
    uid = clean_products(products).records[1]["instructions"][0]["task_uid"]
    annotations = tmp_path / "ann.json"
    annotations.write_text(json.dumps([_annotation(1, asin="824100258498", task_uid=uid)]), "utf-8")
    out = tmp_path / "annotated"
    prepare_dataset(FIXTURE_ARCHIVE, out, options=PrepareOptions(test_size=2, val_size=2, annotations=annotations))
    assert Catalog.from_data_dir(out).goals[1]["price_upper"] == 1000.0


def test_too_small_for_default_split_is_a_clear_cli_error(tmp_path, capsys):
    code = main(["data", "prepare", "--archive", str(FIXTURE_ARCHIVE), "--out", str(tmp_path / "x"),
                 "--test-size", "400", "--val-size", "400"])
    assert code == 2
    assert "too few for --test-size 400" in capsys.readouterr().err


def test_cli_info_and_search(prepared_dir, capsys):
    assert main(["data", "info", str(prepared_dir)]) == 0
    assert "cleaned_product_count" in capsys.readouterr().out
    assert main(["data", "search", str(prepared_dir), "宿舍 冰箱", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["asin"] for h in hits][:2] == ["000000000001", "000000000003"]
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert all(isinstance(h["score"], float) for h in hits)


def test_edited_archive_is_refused(tmp_path, prepared_dir):
    copy_dir = tmp_path / "copy"
    shutil.copytree(prepared_dir, copy_dir)
    data = gzip.decompress((copy_dir / "products.json.gz").read_bytes()).replace("小吃车".encode(), "小推车".encode())
    (copy_dir / "products.json.gz").write_bytes(gzip.compress(data))
    with raises_kind(DataError, "data_integrity", match="does not match its manifest"):
        Catalog.from_data_dir(copy_dir)


def test_cli_eval_search_over_explicit_ids(prepared_dir, capsys):
    assert main(["data", "eval-search", str(prepared_dir), "--split", "all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metrics"]["full"]["queries"] == 15 and report["split"] == "all"
    assert set(report["metrics"]["simple"]) == {"queries", "recall_at_1", "recall_at_20", "recall_at_150", "mrr_at_150"}
    assert report["metric_scope"] == "Gold-ASIN retrieval proxy; alternatives may also be valid"
    assert main(["data", "eval-search", str(prepared_dir), "--split", "nope"]) == 2


def test_public_api_is_re_exported():
    import shopsimrl

    assert shopsimrl.parse_budget("预算4千4百元以内") == 4400.0
    assert callable(shopsimrl.score_purchase) and hasattr(shopsimrl.ShopEnv, "from_data_dir")


def test_persona_split_metadata_follows_the_reference_builder(prepared_dir):
    """Issue 28 item 6: roles are the split names (val, not validation); source names the inputs with their SHA-256."""
    import json as json_

    splits = json_.loads((prepared_dir / "persona_splits.json").read_text("utf-8"))
    assert {name: entry["role"] for name, entry in splits["splits"].items()} == {
        "test": "test", "val": "val", "train": "train"}
    source = splits["source"]
    assert len(source) == 8 and source["cleaned_archive"] == "products.json.gz"
    manifest = json_.loads((prepared_dir / "manifest.json").read_text("utf-8"))
    assert source["source_archive_sha256"] == manifest["source_archive_sha256"]
    assert source["cleaned_archive_sha256"] == manifest["output_archive_sha256"]
    assert source["cleaned_archive_data_sha256"] == manifest["output_data_sha256"]

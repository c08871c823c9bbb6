"""Archive reading and validation (issue 2 item 2)."""

from __future__ import annotations

import copy
import gzip
import json

import pytest

from shopsimrl.catalog.archive import (
    dump_archive_json,
    gzip_deterministic,
    load_archive,
    parse_archive_json,
    validate_records,
)
from shopsimrl.errors import ArchiveError


def test_fixture_loads_from_json_and_gzip(tmp_path, fixture_records):
    plain = tmp_path / "a.json"
    plain.write_text(json.dumps(fixture_records, ensure_ascii=False), "utf-8")
    packed = tmp_path / "a.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    products_plain, _ = load_archive(plain)
    products_gz, _ = load_archive(packed)
    assert [p.asin for p in products_plain] == [p.asin for p in products_gz] == [r["asin"] for r in fixture_records]
    cart = products_plain[0]
    assert cart.is_persona and cart.instructions[0].instruction_simple
    assert cart.pricing == (800.0, 1350.0)


def _problem(records, match):
    with pytest.raises(ArchiveError, match=match):
        validate_records(records)


def test_errors_name_index_asin_and_field(fixture_records):
    records = copy.deepcopy(fixture_records)
    del records[2]["shop_name"]
    _problem(records, r"record 2 \(asin '824100258499'\) field 'shop_name'")

    records = copy.deepcopy(fixture_records)
    records[1]["attribute"] = "不是列表"
    _problem(records, r"record 1 .*field 'attribute'")

    records = copy.deepcopy(fixture_records)
    records[4]["asin"] = records[3]["asin"]
    _problem(records, r"record 4 .*duplicate ASIN \(first seen at record 3\)")

    records = copy.deepcopy(fixture_records)
    records[0]["instructions"][0]["task_id"] = 5
    records[1]["instructions"][0]["task_id"] = 5
    _problem(records, r"record 1 .*instructions\[0\].task_id.*duplicate task_id 5")

    records = copy.deepcopy(fixture_records)
    records[0]["instructions"][0]["attributes"] = [1, 2]
    _problem(records, r"instructions\[0\].attributes")


def test_simple_instruction_requires_persona_and_reverse(fixture_records):
    records = copy.deepcopy(fixture_records)
    records[1]["instructions"][0]["instruction_simple"] = "简化"  # standard product
    _problem(records, r"record 1 .*instruction_simple.*present without a user_persona")
    records = copy.deepcopy(fixture_records)
    records[0]["instructions"][0]["instruction_simple"] = None  # persona product
    _problem(records, r"record 0 .*instruction_simple.*missing although the product has a user_persona")


def test_bad_json_and_wrong_top_level():
    with pytest.raises(ArchiveError, match="not valid JSON: line 1"):
        parse_archive_json(b"[{")
    with pytest.raises(ArchiveError, match="top-level JSON array"):
        parse_archive_json(b'{"asin": "1"}')


def test_corrupt_gzip_is_a_typed_error(tmp_path):
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ArchiveError, match="corrupt gzip"):
        load_archive(broken)


def test_all_problems_are_reported_at_once(fixture_records):
    records = copy.deepcopy(fixture_records)
    for record in records[:3]:
        record["images"] = []
    with pytest.raises(ArchiveError) as info:
        validate_records(records)
    assert "3 validation problem(s)" in str(info.value)


def test_cleaned_fields_are_kept_as_given(fixture_records):
    records = copy.deepcopy(fixture_records)
    records[0]["instructions"][0].update(task_id=41, task_uid="shopsim-given", price_upper=12.5)
    product = validate_records(records)[0]
    assert (product.instructions[0].task_id, product.instructions[0].task_uid) == (41, "shopsim-given")
    assert product.instructions[0].price_upper == 12.5


def test_canonical_dump_is_deterministic(fixture_records):
    first = gzip_deterministic(dump_archive_json(fixture_records))
    second = gzip_deterministic(dump_archive_json(copy.deepcopy(fixture_records)))
    assert first == second
    assert dump_archive_json(fixture_records).endswith(b"]\n")

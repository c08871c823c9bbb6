"""Archive reading and validation (issue 2 item 2)."""

from __future__ import annotations

import copy
import gzip
import json

import pytest

from error_kinds import raises_kind
from shopsimrl.catalog.archive import (
    dump_archive_json,
    gzip_deterministic,
    load_archive,
    parse_archive_json,
    validate_records,
)
from shopsimrl.errors import DataError


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
    with raises_kind(DataError, "archive", match=match):
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
    with raises_kind(DataError, "archive", match="not valid JSON: line 1"):
        parse_archive_json(b"[{")
    with raises_kind(DataError, "archive", match="top-level JSON array"):
        parse_archive_json(b'{"asin": "1"}')


def test_corrupt_gzip_is_a_typed_error(tmp_path):
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with raises_kind(DataError, "archive", match="corrupt gzip"):
        load_archive(broken)


def test_all_problems_are_reported_at_once(fixture_records):
    records = copy.deepcopy(fixture_records)
    for record in records[:3]:
        record["images"] = []
    with raises_kind(DataError, "archive") as info:
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


# ---------------------------------------------------------------- issue 13 item 8: hostile archives
def test_deeply_nested_archive_is_a_typed_error_not_a_recursion_error(fixture_records):
    body = json.dumps(fixture_records, ensure_ascii=False)
    hostile = (body[:-1] + "," + "[" * 100_000 + "]" * 100_000 + "]").encode()
    with raises_kind(DataError, "archive", match="nested too deeply"):
        parse_archive_json(hostile)


def test_a_record_nested_deeper_than_the_bound_is_refused(fixture_records):
    records = copy.deepcopy(fixture_records)
    records[3]["user_persona"] = {"deep": json.loads("[" * 900 + "]" * 900)}  # loads, but overflows copying
    _problem(records, r"record 3 .*field 'user_persona\.deep.*nested deeper than 32 levels")


def test_a_lone_surrogate_is_refused_by_validation(fixture_records):
    body = json.dumps(fixture_records, ensure_ascii=False).replace('"title": "鑫厨', '"title": "\\ud800鑫厨', 1)
    records = parse_archive_json(body.encode())  # a "\ud800" escape is valid JSON and decodes to a lone surrogate
    _problem(records, r"record 0 .*field 'title': lone surrogate U\+D800 at character 0")
    records = copy.deepcopy(fixture_records)
    records[2]["user_persona"] = {"\udfffkey": 1}
    _problem(records, r"record 2 .*field 'user_persona': key .* holds a lone surrogate")
    records = copy.deepcopy(fixture_records)
    records[1]["instructions"][0]["attributes"] = ["ok", "bad\ud83d"]
    _problem(records, r"record 1 .*field 'instructions\[0\]\.attributes\[1\]': lone surrogate")


@pytest.mark.parametrize(
    ("pricing", "message"),
    [
        ([-1.0, 10.0], "pricing': must be a list of finite numbers ≥ 0"),
        ([0.0], "pricing': only zero prices"),
        ([0, 0.0], "pricing': only zero prices"),
        ([float("nan")], "pricing': must be a list of finite numbers ≥ 0"),
        ([float("inf"), 1.0], "pricing': must be a list of finite numbers ≥ 0"),
    ],
)
def test_negative_zero_only_and_non_finite_prices_are_refused(fixture_records, pricing, message):
    records = copy.deepcopy(fixture_records)
    records[5]["pricing"] = pricing
    _problem(records, r"record 5 .*" + message)


def test_negative_and_non_finite_option_prices_are_refused(fixture_records):
    for bad in (-0.5, float("inf")):
        records = copy.deepcopy(fixture_records)
        records[0]["customization_options"]["颜色分类"][1]["price"] = bad
        _problem(records, r"record 0 .*颜色分类\[1\]\.price': must be a finite number ≥ 0 or null")
    records = copy.deepcopy(fixture_records)
    records[0]["pricing"] = [0.0, 1350.0]  # a zero among real prices is a price
    records[0]["customization_options"]["颜色分类"][1]["price"] = 0.0
    assert validate_records(records)[0].pricing == (0.0, 1350.0)


def test_a_single_problem_is_one_line(fixture_records):
    records = copy.deepcopy(fixture_records)
    records[5]["pricing"] = [-1.0]
    with raises_kind(DataError, "archive") as info:
        validate_records(records, source="a.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("a.json: validation problem: record 5")

"""Variant (SKU) price resolution (docs/contract.md#variant-price, acceptance cases 51–55 anchors) and the listing-price display."""

from __future__ import annotations

from typing import Any

import pytest

from shopsimrl.catalog.options import price_affecting_axes
from shopsimrl.env.variant_price import listing_prices, price_display, resolve_variant_price

P = 1999.0


def product(p: float = P, large: float | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "asin": "gold",
        "title": "智能热洗白色洗地机",
        "category": "家电›清洁电器›洗地机",
        "attribute": ["智能", "热洗"],
        "pricing": [p],
        "customization_options": {
            "颜色分类": [{"value": "白色", "price": p}, {"value": "黑色", "price": p + 100}],
            "尺码": [{"value": "标准版", "price": p}, {"value": "大号", "price": p if large is None else large}],
        },
    }
    record.update(extra)
    return record


def resolution(status: str, price: float | None, method: str, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "price": price, "version": "variant-price-paper-v2", "method": method, "evidence": evidence}


def test_price_is_resolved_from_selected_single_price_axis() -> None:  # acceptance case 51
    assert price_affecting_axes(product()["customization_options"]) == ["颜色分类"]
    assert resolve_variant_price(product(), {"颜色分类": "白色"}) == resolution(
        "pass", 1999.0, "selected_price_axis", {"price_axis": "颜色分类"}
    )
    assert resolve_variant_price(product(), {"颜色分类": "黑色", "尺码": "大号"})["price"] == 2099.0
    assert resolve_variant_price(product(), {}) == resolution(
        "unverifiable", None, "price_axis_unselected", {"price_axis": "颜色分类"}
    )


def test_price_axis_requires_the_exact_source_axis_name() -> None:  # acceptance case 52
    assert resolve_variant_price(product(), {"color": "白色"}) == resolution(
        "unverifiable", None, "price_axis_unselected", {"price_axis": "颜色分类"}
    )


def test_multiple_price_axes_are_detected_for_catalog_filtering() -> None:  # acceptance case 53
    two_axes = product(large=2299.0)
    assert price_affecting_axes(two_axes["customization_options"]) == ["颜色分类", "尺码"]
    assert resolve_variant_price(two_axes, {}) == resolution(
        "unverifiable", None, "multiple_price_affecting_axes", {"price_affecting_axes": ["颜色分类", "尺码"]}
    )
    assert resolve_variant_price(two_axes, {"颜色分类": "白色", "尺码": "标准版"})["status"] == "unverifiable"


def test_selection_must_be_an_object() -> None:
    for bad in (None, [], "白色", [("颜色分类", "白色")]):
        assert resolve_variant_price(product(), bad) == resolution(
            "unverifiable", None, "invalid_selected_options", {"reason": "selected_options_not_object"}
        )


def test_unknown_value_or_missing_price_on_the_price_axis() -> None:
    assert resolve_variant_price(product(), {"颜色分类": "红色"}) == resolution(
        "unverifiable", None, "selected_variant_price_missing", {"price_axis": "颜色分类"}
    )
    record = product()
    record["customization_options"]["颜色分类"].append({"value": "灰色"})
    assert resolve_variant_price(record, {"颜色分类": "灰色"})["method"] == "selected_variant_price_missing"


def test_display_values_match_source_values() -> None:
    record = {
        "customization_options": {
            "颜色分类": [{"value": "黑色/白色", "price": 10}, {"value": "M", "price": 12}],
        }
    }
    assert resolve_variant_price(record, {"颜色分类": "黑色 | 白色"})["price"] == 10.0
    assert resolve_variant_price(record, {"颜色分类": "m"})["price"] == 12.0


def test_constant_option_price_passes_without_a_selection() -> None:
    record = {"pricing": [5, 9], "customization_options": {"规格": [{"value": "a", "price": 7}, {"value": "b", "price": 7}]}}
    assert resolve_variant_price(record, {}) == resolution("pass", 7.0, "constant_option_price", {})


def test_option_axes_without_prices_are_not_deterministic() -> None:
    record = {"pricing": [5], "customization_options": {"规格": [{"value": "a"}, {"value": "b"}]}}
    assert resolve_variant_price(record, {"规格": "a"}) == resolution(
        "unverifiable", None, "price_not_deterministic", {"candidate_prices": []}
    )


def test_single_listing_price_only_without_option_axes() -> None:
    assert resolve_variant_price({"pricing": [199]}, {}) == resolution("pass", 199.0, "single_listing_price", {})
    assert resolve_variant_price({"pricing": [199, 199.0]}, {})["price"] == 199.0
    assert resolve_variant_price({"pricing": [29.9, 59.0]}, {}) == resolution(
        "unverifiable", None, "price_not_deterministic", {"candidate_prices": []}
    )
    # Only the first two entries are kept: [10, 10, 20] is a single price, [10, 20, 10] a range.
    assert resolve_variant_price({"pricing": [10, 10, 20]}, {})["price"] == 10.0
    assert resolve_variant_price({"pricing": [10, 20, 10]}, {})["status"] == "unverifiable"


@pytest.mark.parametrize("pricing", [None, [], "199", {"min": 1}])
def test_no_pricing_is_unverifiable_not_one_hundred(pricing: object) -> None:
    # Defect fixed (issue 3): the reference loader turned a missing pricing into [100.0].
    record = {"customization_options": {}} if pricing is None else {"pricing": pricing}
    assert resolve_variant_price(record, {}) == resolution(
        "unverifiable", None, "price_not_deterministic", {"candidate_prices": []}
    )


def test_candidate_prices_are_sorted_and_distinct() -> None:
    record = {
        "customization_options": {
            "颜色": [{"value": "a", "price": 3}, {"value": "z", "price": 3}],
            "尺码": [{"value": "b", "price": 1}, {"value": "c"}],
        }
    }
    # Neither axis alone has two prices, but together they do: nothing is deterministic.
    assert resolve_variant_price(record, {"颜色": "a", "尺码": "b"})["evidence"] == {"candidate_prices": [1.0, 3.0]}


def test_listing_prices_ignore_invalid_numbers() -> None:
    assert listing_prices([float("nan"), 3]) == [3.0]
    assert listing_prices([-1, True]) == []
    assert listing_prices([1, 2, 3]) == [1.0, 2.0]


@pytest.mark.parametrize(
    ("pricing", "expected"),
    [
        ([199], "199"),
        ([199.0], "199.0"),
        ([29.9, 59.0], "29.9 to 59.0"),
        ([1999, 2599.5, 3000], "1999 to 2599.5"),
        ((5, 6), "5 to 6"),
        ([], None),
        (None, None),
        ("199", None),
    ],
)
def test_price_display(pricing: object, expected: str | None) -> None:
    assert price_display(pricing) == expected

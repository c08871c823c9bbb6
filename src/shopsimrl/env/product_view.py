"""Per-product page data computed once per process and shared by every session.

The catalog is read-only, so everything a product page needs (display options, click labels, the summary
shown in result lists) is derived once and reused; a step then only assembles small dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.options import display_option_value
from ..catalog.records import Product
from ..contract import option_label
from .observation import MAX_VALUES_PER_AXIS, product_summary


@dataclass(frozen=True, slots=True)
class OptionLabel:
    label: str
    axis: str
    value: str


@dataclass(frozen=True, slots=True)
class _Options:
    axes: tuple[str, ...]
    values: Mapping[str, tuple[str, ...]]
    labels: tuple[OptionLabel, ...]


def _build_options(product: Product) -> _Options:
    """Display values per option axis and the ``axis=value`` click labels (first occurrence wins)."""
    values: dict[str, tuple[str, ...]] = {}
    for axis, entries in product.customization_options.items():
        if entries is None:
            continue
        values[str(axis)] = tuple(
            display_option_value(entry["value"]) for entry in entries if isinstance(entry, Mapping)
        )
    labels: list[OptionLabel] = []
    seen: set[str] = set()
    for axis, axis_values in values.items():
        for value in axis_values:
            label = option_label(axis, value)
            if label not in seen:
                seen.add(label)
                labels.append(OptionLabel(label, axis, value))
    return _Options(axes=tuple(values), values=values, labels=tuple(labels))


class ProductView:
    """A product's page data. The summary (all a result list needs) is made at once; the option axes,
    values and click labels only when the product page is first built, since most listed products are
    never opened."""

    __slots__ = ("_options", "asin", "product", "summary")

    def __init__(self, asin: str, product: Product, summary: Mapping[str, Any]) -> None:
        self.asin = asin
        self.product = product
        self.summary = summary
        self._options: _Options | None = None

    @classmethod
    def of(cls, product: Product) -> ProductView:
        return cls(asin=product.asin, product=product, summary=product_summary(product.raw))

    def _built(self) -> _Options:
        # One assignment of an immutable tuple: concurrent readers see nothing or complete data.
        if self._options is None:
            self._options = _build_options(self.product)
        return self._options

    @property
    def axes(self) -> tuple[str, ...]:
        return self._built().axes

    @property
    def values(self) -> Mapping[str, tuple[str, ...]]:
        return self._built().values

    @property
    def labels(self) -> tuple[OptionLabel, ...]:
        return self._built().labels

    def available_options(self) -> dict[str, list[str]]:
        return {axis: list(values[:MAX_VALUES_PER_AXIS]) for axis, values in self.values.items()}

    def label_of(self, label: str) -> OptionLabel | None:
        for option in self.labels:
            if option.label == label:
                return option
        return None

    def check_selection(self, selected: Mapping[str, str]) -> tuple[dict[str, str], list[dict[str, str]], list[str]]:
        """(valid selections, invalid selections with reasons, missing axes in product order) — docs/contract.md#option-completeness."""
        valid: dict[str, str] = {}
        invalid: list[dict[str, str]] = []
        for axis, value in selected.items():
            if axis not in self.values:
                invalid.append({"axis": axis, "value": value, "reason": "unknown_axis"})
            elif value not in self.values[axis]:
                invalid.append({"axis": axis, "value": value, "reason": "unknown_value"})
            else:
                valid[axis] = value
        missing = [axis for axis in self.axes if axis not in valid]
        return valid, invalid, missing

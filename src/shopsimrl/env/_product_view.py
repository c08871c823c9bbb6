"""Per-product page data computed once per process and shared by every session.

The catalog is read-only, so everything a product page needs (display options, click labels, the summary
shown in result lists) is derived once and reused; a step then only assembles small dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.options import display_option_value
from ..catalog.records import Product
from ..contract import option_label
from ._observation import MAX_VALUES_PER_AXIS, product_summary


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
    """A product's page data. The summary (all a result list needs) is made at once; the ``Product``, the
    option axes, values and click labels only when the product page is first built, since most listed
    products are never opened."""

    __slots__ = ("_load", "_options", "_product", "asin", "summary")

    def __init__(
        self, asin: str, product: Product | None, summary: Mapping[str, Any], load: Callable[[], Product] | None = None
    ) -> None:
        if product is None and load is None:
            raise TypeError("a ProductView needs its product or a way to load it")
        self.asin = asin
        self._product = product
        self._load = load
        self.summary = summary
        self._options: _Options | None = None

    @classmethod
    def of(cls, product: Product) -> ProductView:
        return cls(asin=product.asin, product=product, summary=product_summary(product.raw))

    @classmethod
    def listed(cls, asin: str, record: Mapping[str, Any], load: Callable[[], Product]) -> ProductView:
        """The view of a product seen in a result list: its summary from the archive record, the ``Product``
        loaded (and checked) by ``load`` on first use."""
        return cls(asin=asin, product=None, summary=product_summary(record), load=load)

    @property
    def product(self) -> Product:
        # One assignment of an immutable object: two threads may both load it; either result is the same.
        product = self._product
        if product is None:
            assert self._load is not None
            product = self._product = self._load()
        return product

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

"""Read the rendered observation text back into structure (what a text-only agent can see).

Built-in policies decide from the text a model receives, never from hidden state, so they behave the same
in-process and behind the policy server. The format is the observation v7 rendering (docs/contract.md#observation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import contract as words
from ..contract import MISSING_TEXT as MISSING  # the old name

# The page type of each heading; the (unreachable) attributes subpage reads as its product page.
_KINDS = {heading: words.PRODUCT_DETAIL if kind == words.INFORMATION_SUBPAGE else kind
          for kind, heading in words.PAGE_HEADINGS.items()}
_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+to\s+(-?\d+(?:\.\d+)?)\s*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RANK_LINE = re.compile(r"^(\d+)\. (.*)$")


@dataclass
class PageItem:
    """A product as shown in a result list or on its page."""

    asin: str = ""
    title: str = ""
    price: str = ""
    brand: str = ""
    category: str = ""
    attributes: list[str] = field(default_factory=list)
    rank: int = 0

    def price_bounds(self) -> tuple[float, float] | None:
        return price_bounds(self.price)


@dataclass
class Page:
    """The parsed page: its kind, the listed or opened product, options and the clickable values."""

    kind: str  # search_home | search_results | product_detail | terminal | unknown
    items: list[PageItem] = field(default_factory=list)
    product: PageItem | None = None
    options: dict[str, list[str]] = field(default_factory=dict)
    selected: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    clickables: list[str] = field(default_factory=list)
    search_text: str = ""
    page_number: int = 0
    total_pages: int = 0
    last_valid: bool | None = None


def price_bounds(text: str) -> tuple[float, float] | None:
    """``"800.0 to 1350.0"`` → (800, 1350); ``"1099.0"`` or ``"[299]"`` → (x, x); 未提供 → None."""
    if not text or text == MISSING:
        return None
    match = _RANGE.match(text)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return (min(low, high), max(low, high))
    numbers = [float(n) for n in _NUMBER.findall(text)]
    if not numbers:
        return None
    return (min(numbers), max(numbers))


def _field(item: PageItem, key: str, value: str) -> None:
    if key == "ASIN":
        item.asin = value
    elif key == "价格":
        item.price = value
    elif key == "品牌":
        item.brand = value
    elif key == "类别":
        item.category = value
    elif key == "关键属性":
        item.attributes = [part for part in value.split("；") if part]
    elif key == "标题":
        item.title = value


def parse_page(text: str) -> Page:
    """Parse one observation text; unknown lines are ignored, so a newer renderer degrades gracefully."""
    lines = text.splitlines()
    head = lines[0] if lines else ""
    page = Page(kind=_KINDS.get(head, "unknown"))
    section = ""
    current: PageItem | None = None
    axis: str | None = None
    for line in lines[1:]:
        if line in words.SECTION_HEADINGS:
            section = line
            continue
        if not line:
            continue
        if section == words.CLICKABLES_HEADING and line.startswith("- "):
            page.clickables.append(line[2:])
        elif section == words.LAST_ACTION_HEADING and line.startswith(words.RESULT_PREFIX):
            page.last_valid = line.endswith("成功")
        elif line.startswith(words.SEARCH_TEXT_PREFIX):
            page.search_text = line.split("：", 1)[1]
        elif line.startswith(words.RESULTS_LINE_PREFIX):
            numbers = _NUMBER.findall(line)
            if len(numbers) >= 2:
                page.page_number, page.total_pages = int(numbers[0]), int(numbers[1])
        elif section == words.PRODUCTS_HEADING:
            rank_match = _RANK_LINE.match(line)
            if rank_match and not line.startswith("   "):
                current = PageItem(title=rank_match.group(2), rank=int(rank_match.group(1)))
                page.items.append(current)
            elif current is not None and "：" in line:
                key, value = line.strip().split("：", 1)
                _field(current, key, value)
        elif section == words.PRODUCT_HEADING and line.startswith("- ") and "：" in line:
            if page.product is None:
                page.product = PageItem()
            key, value = line[2:].split("：", 1)
            _field(page.product, key, value)
        elif section == words.OPTIONS_HEADING:
            if line.startswith(words.OPTION_VALUES_PREFIX) and axis is not None:
                page.options[axis] = line.split("：", 1)[1].split(" / ")
            elif line.startswith("- ") and "：" in line and line != words.NO_OPTIONS_LINE:
                axis, state = line[2:].rsplit("：", 1)
                page.options.setdefault(axis, [])
                if state.startswith(words.SELECTED_PREFIX):
                    page.selected[axis] = state[len(words.SELECTED_PREFIX) :]
            elif line.startswith(words.MISSING_AXES_PREFIX):
                page.missing = line.split("：", 1)[1].split("、")
    return page

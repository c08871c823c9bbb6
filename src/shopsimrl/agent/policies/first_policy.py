"""The trivial policy: search the visible request, open the first result, take the first value of each axis, buy.

It is the floor a generated catalog must keep low (below 15% success on the test split): a catalog
where the first hit with its first option values succeeds tests nothing.
"""

from __future__ import annotations

from ...contract import BUY_NOW as BUY
from ...contract import PRODUCT_DETAIL, SEARCH_RESULTS, option_label
from ...errors import PolicyError
from ..page_text import parse_page
from ..policy import PolicyAction, PolicyContext


class FirstResultPolicy:
    """First result, first option values, buy (deterministic, stateless)."""

    name = "first"

    def act(self, context: PolicyContext) -> PolicyAction:
        clicks = context.click_values()
        if context.search_offered:
            return PolicyAction.search(context.instruction.strip() or "商品", "first: search the request")
        page = parse_page(context.observation)
        if page.kind == SEARCH_RESULTS and page.items and page.items[0].asin in clicks:
            return PolicyAction.click(page.items[0].asin, "first: open the first result")
        if page.kind == PRODUCT_DETAIL:
            for axis, values in page.options.items():
                if axis not in page.selected and values and option_label(axis, values[0]) in clicks:
                    return PolicyAction.click(option_label(axis, values[0]), "first: first option value")
            if BUY in clicks:
                return PolicyAction.click(BUY, "first: buy")
        if not clicks:
            raise PolicyError(f"the first-result policy has no action on this page ({page.kind})")
        return PolicyAction.click(clicks[0], "first: recover")

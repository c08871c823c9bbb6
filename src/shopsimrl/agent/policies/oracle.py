"""The oracle: reads the private goal and plays it through the normal page actions.

It is a solvability check, not a baseline: a task the oracle cannot finish with r_success = 1 is a defect of
the catalog (its gold product is unreachable by search, or no SKU of it satisfies its own goal).
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from ...catalog.goals import strip_reasoning
from ...contract import BACK_TO_SEARCH as BACK
from ...contract import BUY_NOW as BUY
from ...contract import NEXT, PREV, PRODUCT_DETAIL, SEARCH_RESULTS, SEARCH_TOOL, action_argument, option_label
from ...env import score_purchase
from ...env.shop_env import ShopWorld
from ...errors import PolicyError
from ..page_text import parse_page
from ..policy import PolicyAction, PolicyContext

MAX_COMBINATIONS = 4096


class OraclePolicy:
    """Search the gold product by its own texts, open it, pick a winning SKU, buy."""

    name = "oracle"

    def __init__(self, world: ShopWorld) -> None:
        self.world = world
        self._by_visible: dict[tuple[str, str], list[int]] = {}
        self._plan = lru_cache(maxsize=8192)(self._winning_selection)

    # -------------------------------------------------------------- task
    def _index(self) -> dict[tuple[str, str], list[int]]:
        if not self._by_visible:
            for task_id, goal in sorted(self.world.catalog.goals.items()):
                persona = strip_reasoning(goal.get("user_persona")) or {}
                user = str(persona.get("用户ID", ""))
                for text, key_user in ((goal.get("instruction_simple") or "", user), (goal["instruction_text"], "")):
                    if text:
                        self._by_visible.setdefault((text, key_user), []).append(task_id)
        return self._by_visible

    def resolve_task(self, context: PolicyContext) -> int:
        """The task id: given in-process, else found from the visible instruction (and persona user id)."""
        if context.task_id is not None:
            return context.task_id
        user = str(context.persona.get("用户ID", "")) if context.persona else ""
        matches = self._index().get((context.instruction, user)) or self._index().get((context.instruction, ""))
        if not matches:
            raise PolicyError(
                "the oracle cannot find a task with this instruction in its catalog; over the policy server it needs "
                "the task id: run `eval --send-task-id` (each request then carries shopsim_task_id; in dialogue mode "
                "the instruction is withheld, so this is the only way)"
            )
        return matches[0]

    def _winning_selection(self, task_id: int) -> tuple[tuple[str, str], ...]:
        """The first option selection (product order) that makes the gold product a full success."""
        goal = self.world.catalog.goal(task_id)
        view = self.world.view(goal["asin"])
        axes = [axis for axis in view.axes if view.values[axis]]
        best: tuple[float, tuple[tuple[str, str], ...]] | None = None
        combos = itertools.product(*(view.values[axis] for axis in axes))
        for values in itertools.islice(combos, MAX_COMBINATIONS):
            selection = dict(zip(axes, values, strict=True))
            detail = score_purchase(view.product.raw, goal, selection)
            key = tuple(selection.items())
            if detail["r_success"] == 1:
                return key
            if best is None or detail["r_strict"] > best[0]:
                best = (float(detail["r_strict"]), key)
        return best[1] if best else ()

    def queries(self, task_id: int) -> list[str]:
        goal = self.world.catalog.goal(task_id)
        product = self.world.catalog.products_by_asin[goal["asin"]]
        leaf = str(goal.get("category") or "").split("›")[-1]
        candidates = [product.title, f"{leaf} {' '.join(goal.get('attributes') or [])}", goal["instruction_text"]]
        return list(dict.fromkeys(query.strip() for query in candidates if query and query.strip()))

    # -------------------------------------------------------------- act
    def act(self, context: PolicyContext) -> PolicyAction:
        task_id = self.resolve_task(context)
        goal = self.world.catalog.goal(task_id)
        target = str(goal["asin"])
        page = parse_page(context.observation)
        clicks = context.click_values()
        if context.search_offered:
            used = {action_argument(turn.action, SEARCH_TOOL) for turn in context.history}
            queries = self.queries(task_id)
            remaining = [query for query in queries if query not in used]
            query = remaining[0] if remaining else queries[0]
            return PolicyAction.search(query, "oracle: search the gold product")
        if page.kind == SEARCH_RESULTS:
            if target in clicks:
                return PolicyAction.click(target, "oracle: the gold product is listed")
            if NEXT in clicks:
                return PolicyAction.click(NEXT, "oracle: look on the next page")
            return PolicyAction.click(BACK, "oracle: try another query")
        if page.kind == PRODUCT_DETAIL:
            if page.product is None or page.product.asin != target:
                return PolicyAction.click(PREV if PREV in clicks else BACK, "oracle: not the gold product")
            for axis, value in self._plan(task_id):
                if page.selected.get(axis) != value:
                    label = option_label(axis, value)
                    if label in clicks:
                        return PolicyAction.click(label, "oracle: select the winning SKU")
            if BUY in clicks:
                return PolicyAction.click(BUY, "oracle: buy")
        if clicks:
            return PolicyAction.click(clicks[0], "oracle: fallback")
        raise PolicyError(f"the oracle has no action on this page ({page.kind})")

"""One episode's page state machine (docs/contract.md#pages-and-actions): explicit page variable, checks in contract order.

A session owns only small mutable state (page, query, current product, selected options, counters); the
catalog, the search index and per-product page data are shared read-only, so thousands of sessions can
live in one process without interfering.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..catalog.plain_copy import plain_copy
from ..contract import (
    ACTION_LIMIT,
    BACK_TO_SEARCH,
    BUY_NOW,
    CONTINUE_MESSAGE,
    INVALID_FORMAT,
    INVALID_MESSAGE,
    NEXT,
    PREV,
    PRODUCT_DETAIL,
    PURCHASE,
    SEARCH_HOME,
    SEARCH_RESULTS,
    SINGLE_TURN,
    TERMINAL,
    extract_action,
    parse_action,
    require_action_text,
    terminated_message,
)
from ..errors import EpisodeStateError
from ..search import normalize_query
from ..versions import EPISODE_LIMITS, PAGE_SIZE
from . import _actions as act
from ._observation import home_state, product_state, render_observation, results_state, terminal_state
from ._product_view import ProductView
from ._reward import empty_reward_detail, score_purchase
from ._variant_price import resolve_variant_price
from .requests import check_interaction_mode, check_termination_reason
from .tools import Conversation, tool_named

SearchFn = Callable[[str], tuple[str, ...]]
ViewFn = Callable[[str], ProductView]


def _public_copy(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a shared product summary that callers may mutate without touching the shared page data."""
    item = dict(summary)
    item["key_attributes"] = list(item.get("key_attributes") or [])
    return item


class ShopSession:
    """State of one episode; ``step`` applies one canonical action string and returns the interact result."""

    dialogue = False  # whether dialogue-only tools (``ask_user``) apply

    __slots__ = (
        "_search",
        "_view",
        "action_count",
        "counters",
        "done",
        "goal",
        "interaction_mode",
        "last_action",
        "max_actions",
        "normalized_query",
        "opened_asins",
        "options",
        "page",
        "page_number",
        "price_resolution",
        "purchase",
        "queries",
        "result_asins",
        "reward",
        "reward_detail",
        "search_text",
        "session_id",
        "task_id",
        "termination_reason",
        "tool_states",
        "total_pages",
        "view",
    )

    def __init__(
        self,
        *,
        goal: Mapping[str, Any],
        search: SearchFn,
        view: ViewFn,
        interaction_mode: str = SINGLE_TURN,
        session_id: str | None = None,
    ) -> None:
        check_interaction_mode(interaction_mode)
        self._search = search
        self._view = view
        self.goal = goal
        self.task_id: int = goal["task_id"]
        self.session_id = session_id or f"session-{self.task_id}"
        self.interaction_mode = interaction_mode
        self.max_actions = EPISODE_LIMITS[interaction_mode]
        self.done = False
        self.page = SEARCH_HOME
        self.search_text: str | None = None
        self.normalized_query: str | None = None
        self.result_asins: tuple[str, ...] = ()
        self.page_number = 0
        self.total_pages = 0
        self.view: ProductView | None = None
        self.options: dict[str, str] = {}
        self.price_resolution: dict[str, Any] | None = None
        self.last_action: dict[str, Any] | None = None
        self.action_count = 0
        self.counters: Counter[str] = Counter()
        self.queries: set[str] = set()
        self.opened_asins: set[str] = set()
        self.termination_reason: str | None = None
        self.reward = 0.0
        self.reward_detail: dict[str, Any] = {}
        self.purchase: dict[str, Any] = {}
        self.tool_states: dict[str, dict[str, Any]] = {}  # a registered tool's own state (``tool_state``)

    # ----------------------------------------------------------------- observation
    @property
    def selected_price(self) -> float | None:
        resolution = self.price_resolution
        if resolution is not None and resolution.get("status") == "pass":
            return resolution.get("price")
        return None

    def clickables(self) -> list[str]:
        if self.page == SEARCH_RESULTS:
            labels = [BACK_TO_SEARCH]
            if self.page_number > 1:
                labels.append(PREV)
            if self.page_number < self.total_pages:
                labels.append(NEXT)
            labels.extend(asin.casefold() for asin in self.page_asins())
            return labels
        if self.page == PRODUCT_DETAIL:
            assert self.view is not None
            labels = [BACK_TO_SEARCH, PREV]
            if self.missing_axes() == []:
                labels.append(BUY_NOW)
            selected = self.options
            labels.extend(
                option.label for option in self.view.labels if selected.get(option.axis) != option.value
            )
            return labels
        return []

    def page_asins(self) -> tuple[str, ...]:
        start = (self.page_number - 1) * PAGE_SIZE
        return self.result_asins[start : start + PAGE_SIZE]

    def missing_axes(self) -> list[str]:
        assert self.view is not None
        return self.view.check_selection(self.options)[2]

    def observation_state(self) -> dict[str, Any]:
        last = copy.copy(self.last_action) if self.last_action is not None else None
        if self.page == SEARCH_HOME:
            return home_state(last)
        if self.page == TERMINAL:
            return terminal_state(last)
        actions = self.clickables()
        if self.page == SEARCH_RESULTS:
            page_asins = self.page_asins()
            start = (self.page_number - 1) * PAGE_SIZE
            products = []
            for offset, asin in enumerate(page_asins):
                item = _public_copy(self._view(asin).summary)
                item["rank"] = start + offset + 1
                products.append(item)
            return results_state(
                search_text=self.search_text or "",
                normalized_search_text=self.normalized_query or "",
                page=self.page_number,
                total_pages=self.total_pages,
                total_results=len(self.result_asins),
                products=products,
                actions=actions,
                last_action=last,
            )
        assert self.view is not None
        valid, invalid, missing = self.view.check_selection(self.options)
        return product_state(
            product_summary=_public_copy(self.view.summary),
            selected_options=valid,
            available_options=self.view.available_options(),
            missing_option_axes=missing,
            options_complete=not missing and not invalid,
            invalid_selected_options=invalid,
            selected_price=self.selected_price,
            actions=actions,
            last_action=last,
        )

    def observe(self) -> tuple[str, dict[str, Any]]:
        state = self.observation_state()
        return render_observation(state), state

    # ----------------------------------------------------------------- stepping
    def step(self, action: object) -> dict[str, Any]:
        """Apply one action: a canonical action string or a model's whole answer (its ``Action:`` line is
        read out by ``extract_action``, here and nowhere else, so every path reads model text alike)."""
        text = require_action_text(action)
        if self.done:
            raise EpisodeStateError("episode is already terminated; reset before stepping", code="episode_terminated")
        self.action_count += 1
        feedback = self._apply(extract_action(text))
        self.last_action = feedback
        if not self.done and self.action_count >= self.max_actions:
            self._end(ACTION_LIMIT)
        return self._result(feedback)

    def terminate(self, reason: str = ACTION_LIMIT) -> dict[str, Any]:
        check_termination_reason(reason)
        if self.done:
            raise EpisodeStateError("episode is already terminated", code="episode_terminated")
        self._end(reason)
        # the reference's terminate result: no action was taken, so no action_feedback (docs/contract.md#http-reference-api)
        result = self._result(self.last_action)
        del result["action_feedback"]
        result["message"] = terminated_message(reason)
        return result

    def _end(self, reason: str) -> None:
        self.done = True
        self.termination_reason = reason
        self.reward = 0.0
        self.reward_detail = empty_reward_detail(reason)
        self.purchase = {}
        self.page = TERMINAL

    def _result(self, feedback: Mapping[str, Any] | None) -> dict[str, Any]:
        observation, state = self.observe()
        valid = feedback is None or bool(feedback.get("valid"))
        result: dict[str, Any] = {
            "done": self.done,
            # the reference sends the JSON int 0 after an invalid action and 0.0 after a valid one (contract notes)
            "reward": self.reward if self.done else (0.0 if valid else 0),
            "observation": observation,
            "observation_state": state,
            "action_feedback": copy.copy(feedback) if feedback is not None else None,
            "message": CONTINUE_MESSAGE if valid else INVALID_MESSAGE,
            "idx": self.session_id,
            "reward_detail": plain_copy(self.reward_detail) if self.done else {},
            "purchase": plain_copy(self.purchase) if self.done else {},
            "goal": plain_copy(dict(self.goal)) if self.done else {},
            "over": self.done,
        }
        if self.done:
            result["termination_reason"] = self.termination_reason
        return result

    def _apply(self, action: object) -> dict[str, Any]:
        """Parse the action and hand it to the tool it names (``env/tools``); an unknown name is invalid."""
        parsed = parse_action(action)
        shown = action if isinstance(action, str) else repr(action)
        if parsed.error_code is not None:  # a parse error: no name, so no later check could match
            return act.feedback(shown, False, parsed.error_code, parsed.error_message or "")
        tool = tool_named((parsed.name or "").casefold())
        if tool is None or not tool.applies_to(self):
            return act.feedback(shown, False, INVALID_FORMAT, act.MSG_UNKNOWN_ACTION_NAME)
        return tool.apply(self, parsed.argument, shown)

    # ----------------------------------------------------------------- the primitives the tools work through
    @property
    def conversation(self) -> Conversation | None:
        return None  # no shopper outside dialogue mode

    def tool_state(self, tool: str) -> dict[str, Any]:
        return self.tool_states.setdefault(tool, {})

    def run_search(self, query: str) -> None:
        keywords = query.split(" ")
        self.search_text = " ".join(keywords)
        self.normalized_query = normalize_query(self.search_text)
        self.result_asins = self._search(self.search_text)
        self.page = SEARCH_RESULTS
        self.page_number = 1
        self.total_pages = max(1, math.ceil(len(self.result_asins) / PAGE_SIZE))
        self.view = None
        self.options = {}
        self.counters["search"] += 1
        self.queries.add(self.normalized_query)

    def open_product(self, asin: str) -> None:
        self.view = self._view(asin)
        self.options = {}
        self.page = PRODUCT_DETAIL
        self.counters["asin"] += 1
        self.opened_asins.add(self.view.asin)
        self._resolve_price()

    def _resolve_price(self) -> None:
        assert self.view is not None
        self.price_resolution = resolve_variant_price(self.view.product.raw, self.options)

    def go_home(self) -> None:
        self.page = SEARCH_HOME
        self.page_number = 0
        self.view = None
        self.options = {}
        self.price_resolution = None

    def show_results(self, page_number: int) -> None:
        self.page = SEARCH_RESULTS
        self.page_number = page_number
        self.view = None
        self.options = {}

    def select_option(self, axis: str, value: str) -> None:
        self.options[axis] = value
        self.counters["options"] += 1
        self._resolve_price()

    def buy(self) -> None:
        assert self.view is not None
        product = self.view.product
        detail = score_purchase(product.raw, self.goal, dict(self.options), self.price_resolution)
        first = product.instructions[0].instruction if product.instructions else ""
        self.purchase = {
            "asin": product.asin,
            "category": product.category,
            "name": product.title,
            "product_category": product.product_category,
            "instruction_text": first,
            "attributes": list(product.attributes),
            "price": self.selected_price,
            "options": dict(self.options),
        }
        self.counters["purchase"] += 1
        self.done = True
        self.termination_reason = PURCHASE
        self.reward = float(detail["r_strict"])
        self.reward_detail = detail
        self.page = TERMINAL

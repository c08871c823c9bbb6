"""Budget (price ceiling) resolution: text parser, goal-level priority and precomputed annotations."""

from shopsimrl.budget.annotations import load_budget_annotations
from shopsimrl.budget.parser import BudgetParse, parse_budget, parse_budget_detail
from shopsimrl.budget.resolve import resolve_price_upper
from shopsimrl.versions import BUDGET_PARSER_VERSION

__all__ = [
    "BUDGET_PARSER_VERSION",
    "BudgetParse",
    "load_budget_annotations",
    "parse_budget",
    "parse_budget_detail",
    "resolve_price_upper",
]

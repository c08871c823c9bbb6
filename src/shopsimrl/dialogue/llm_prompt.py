"""What the LLM shopper is told: the anchor's shopper rules and only the shopper's own knowledge.

The rules follow ShopSimulator's ``multi_eval/shopper.py`` (facts, in this project's own words): a concrete goal
only the shopper knows, a vague start, details only when asked, colloquial speech, and a refusal that names
what is missing when the agent wants to buy before it has heard every requirement. Two fixed phrases are
asked for verbatim so that the dialogue metrics read LLM and rule replies alike: the neutral answer to a
question outside the goal and the "not complete yet" prefix. The knowledge is the instruction text, the goal
options and the budget ceiling, never the page, the product's id, title or shop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .replies import NEUTRAL_REPLY, PURCHASE_INCOMPLETE
from .slots import budget_wording, format_amount

OPENING_REQUEST = "请提供您的购物需求。"  # the harness's first message to the shopper (the anchor's wording)
INCOMPLETE_PREFIX = PURCHASE_INCOMPLETE.split("{", 1)[0]

RULES = f"""你在扮演一位正在网上购物的顾客，和一位导购助手对话，让助手帮你找到并买下你想要的商品。

规则：
1. 你心里有一个具体的购买目标（见下文），只有你知道，一开始不要全部说出来。第一次回答时只含糊地说想买哪类商品。
2. 主要回答助手的提问：问到什么就答什么，每次最多说一两个要求，不要主动把所有细节一次说完。
3. 说话自然、口语化、简短，像真人购物时那样，每次回复一两句话。
4. 助手问到你的目标里没有的内容时，只回答：{NEUTRAL_REPLY}
5. 助手准备下单或问能不能买时，如果你的目标里还有要求没有告诉过它，就以“{INCOMPLETE_PREFIX}”开头拒绝，并说出还缺哪些方面的信息（例如具体要求、规格、预算）；如果所有要求都已经告诉它了，就同意购买。
6. 不要编造目标里没有的要求，不要提商品编号、链接或店铺。"""


def knowledge(goal: Mapping[str, Any]) -> str:
    """The shopper's private knowledge: its instruction, the option values it wants, the budget ceiling."""
    instruction = str(goal.get("instruction_text") or "")
    options = [str(value) for value in goal.get("goal_options") or ()]
    _, ceiling = budget_wording(goal)
    budget = f"{format_amount(ceiling)}元以内" if ceiling is not None else "没有明确预算"
    return (f"你本轮的购买目标：{instruction}\n"
            f"你要的规格选项：{json.dumps(options, ensure_ascii=False)}\n"
            f"你的预算上限：{budget}")


def system_prompt(goal: Mapping[str, Any]) -> str:
    return f"{RULES}\n\n{knowledge(goal)}"


def conversation_start(goal: Mapping[str, Any]) -> list[dict[str, str]]:
    """The messages before the opening: the system prompt and the harness's request for the shopping need."""
    return [{"role": "system", "content": system_prompt(goal)}, {"role": "user", "content": OPENING_REQUEST}]


def task_instruction(system: str) -> str | None:
    """The instruction a shopper system prompt carries (for servers that script a shopper from the prompt)."""
    marker = "你本轮的购买目标："
    if marker not in system:
        return None
    return system.split(marker, 1)[1].split("\n", 1)[0]

"""Scripted dialogue policies: ask the shopper first, then shop with an existing page policy.

``DialogueOraclePolicy`` asks about every private slot by name (it reads the goal) and then plays the oracle:
the solvability check of dialogue mode (every slot revealed, then r_success = 1). ``DialogueHeuristicPolicy``
uses public information only: it asks a fixed script of general questions until the shopper says it has
nothing more, then runs the heuristic (``dialogue-strong``: the strong rule policy) on the opening plus the
replies. Both are stateless (the questions
asked so far are read from the history).
"""

from __future__ import annotations

from ...contract import ASK_USER_TOOL as ASK
from ...contract import QUESTION_ARGUMENT, SEARCH_TOOL, action_argument
from ...dialogue.replies import ALL_SAID, LEADS
from ...dialogue.slots import ATTRIBUTE, BUDGET, OPTION, build_slots
from ...env._observation import read_observation
from ...env.shop_env import ShopWorld
from ..policy import Policy, PolicyAction, PolicyContext
from .heuristic import HeuristicPolicy
from .oracle import OraclePolicy

GENERAL_SCRIPT = ("你的预算大概是多少？", "对商品有什么具体要求吗？", "规格上有什么要求吗？")
FOLLOW_UP = "还有别的要求吗？"


def ask(question: str, reasoning: str) -> PolicyAction:
    return PolicyAction(ASK, {QUESTION_ARGUMENT: question}, reasoning)


def asked(context: PolicyContext) -> list[str]:
    return [turn.action for turn in context.history if action_argument(turn.action, ASK) is not None]


def replies(context: PolicyContext) -> list[str]:
    """The shopper's replies so far: the ``last_action.reply`` of the page after each question."""
    out: list[str] = []
    for turn in context.history:
        if action_argument(turn.action, ASK) is None:
            continue
        last = read_observation(turn.observation).get("last_action") or {}
        if "reply" in last:
            out.append(last["reply"])
    return out


class DialogueOraclePolicy:
    """Ask about every slot of the private goal, then buy like the oracle."""

    name = "dialogue-oracle"

    def __init__(self, world: ShopWorld) -> None:
        self.world = world
        self.oracle = OraclePolicy(world)

    def questions(self, task_id: int) -> list[str]:
        goal = self.world.catalog.goal(task_id)
        product = self.world.catalog.products_by_asin.get(goal["asin"])
        out: list[str] = []
        for slot in build_slots(goal, product.raw if product is not None else None):
            if slot.kind == ATTRIBUTE:
                out.append(f"需要{slot.value}吗？")
            elif slot.kind == OPTION:
                out.append(f"{slot.axis}选{slot.value}可以吗？")
            elif slot.kind == BUDGET:
                out.append("预算是多少？")
        return out

    def act(self, context: PolicyContext) -> PolicyAction:
        task_id = self.oracle.resolve_task(context)
        plan = self.questions(task_id)
        done = len(asked(context))
        if done < len(plan) and ASK in context.offered():
            return ask(plan[done], "dialogue oracle: ask about the next slot")
        return self.oracle.act(context)


class DialogueHeuristicPolicy:
    """Public information only: a fixed question script, then the heuristic on the opening plus the replies."""

    name = "dialogue-heuristic"

    def __init__(self, max_follow_ups: int = 4, *, inner: Policy | None = None, name: str | None = None) -> None:
        self.heuristic: Policy = inner or HeuristicPolicy()  # ``dialogue-strong``: the strong rule policy
        self.max_follow_ups = max_follow_ups
        if name is not None:
            self.name = name

    def act(self, context: PolicyContext) -> PolicyAction:
        said = replies(context)
        count = len(asked(context))
        finished = bool(said) and said[-1] == ALL_SAID
        if ASK in context.offered() and context.search_offered and not any(
            action_argument(turn.action, SEARCH_TOOL) is not None for turn in context.history
        ):
            if count < len(GENERAL_SCRIPT):
                return ask(GENERAL_SCRIPT[count], "dialogue heuristic: scripted question")
            if not finished and count < len(GENERAL_SCRIPT) + self.max_follow_ups:
                return ask(FOLLOW_UP, "dialogue heuristic: anything else?")
        request = "，".join([context.instruction, *(strip_lead(text) for text in said if text != ALL_SAID)])
        return self.heuristic.act(
            PolicyContext(
                instruction=request,
                observation=context.observation,
                tools=[tool for tool in context.tools if tool.get("function", {}).get("name") != ASK],
                persona=context.persona,
                history=tuple(turn for turn in context.history if not action_argument(turn.action, ASK) is not None),
                task_id=context.task_id,
                seed=context.seed,
            )
        )


def strip_lead(text: str) -> str:
    for lead in LEADS:
        if text.startswith(lead):
            return text[len(lead) :]
    return text


class DialogueStrongPolicy(DialogueHeuristicPolicy):
    """The same question script, then the strong rule policy on the opening plus the replies."""

    name = "dialogue-strong"

    def __init__(self, max_follow_ups: int = 4) -> None:
        from .strong_rule import StrongRulePolicy

        super().__init__(max_follow_ups, inner=StrongRulePolicy())

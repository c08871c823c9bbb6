"""The environment checker's rule book (``checker``): the failures it records, and the rules on a single result's
shape — the documented keys and value types of reset and step results (docs/contract.md#environment-interface)
and a step's own invariants. The episode that produces the results is ``checker``'s."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..contract import CONTINUE_MESSAGE, INVALID_MESSAGE, SEARCH_HOME, TASK_MODES, task_mode
from ..errors import ShopSimError
from .interface import (
    END_REASONS,
    RESET_OPTIONAL_KEYS,
    RESET_REQUIRED_KEYS,
    STEP_OPTIONAL_KEYS,
    STEP_REQUIRED_KEYS,
)

RULES: tuple[str, ...] = (
    "interface",
    "reset-keys",
    "reset-page",
    "tools-consistent",
    "results-not-shared",
    "step-keys",
    "done-flag",
    "invalid-action",
    "terminate",
    "terminate-reference",
    "step-after-end",
    "step-after-end-typed",
    "determinism",
    "unknown-task-typed",
)
SEARCH_PAGE = SEARCH_HOME

# Value types of each result key (``None`` allowed where listed); bool is never accepted as a number.
_TYPES: dict[str, tuple[type, ...]] = {
    "task_instruction": (str,),
    "observation": (str,),
    "message": (str,),
    "task_mode": (str,),
    "interaction_mode": (str,),
    "environment_version": (str,),
    "observation_state": (dict,),
    "user_persona": (dict,),
    "private_task_instruction": (str,),
    "goal_options": (list,),
    "reason_key": (str, type(None)),
    "done": (bool,),
    "over": (bool,),
    "reward": (float, int),
    "reward_detail": (dict,),
    "purchase": (dict,),
    "goal": (dict,),
    "action_feedback": (dict, type(None)),
    "termination_reason": (str,),
}

@dataclass(frozen=True)
class RuleFailure:
    """One broken rule and what was observed."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.detail}"


class _Abort(ShopSimError):
    """A failure after which the episode cannot go on (the remaining rules are not checked)."""


class ResultRules:
    """The bookkeeping of a check (which rules were checked, which broke) and the rules on one result."""

    def __init__(self, env: Any, task_id: int, persona: bool | None, interaction_mode: str,
                 skip: Collection[str]) -> None:
        unknown = set(skip) - set(RULES)
        if unknown:
            raise ShopSimError(f"check_env: unknown rule(s) to skip {sorted(unknown)}; rules are {list(RULES)}")
        self.env = env
        self.task_id = task_id
        self.persona = persona
        self.interaction_mode = interaction_mode
        self.skip = frozenset(skip)
        self.failures: list[RuleFailure] = []
        self.checked: list[str] = []

    def expect(self, rule: str, condition: bool, detail: str) -> bool:
        if rule in self.skip:
            return True
        if rule not in self.checked:
            self.checked.append(rule)
        if not condition:
            self.failures.append(RuleFailure(rule, detail))
        return condition

    def check_reset(self, reset: Mapping[str, Any]) -> None:
        self.check_keys("reset-keys", "reset", reset, RESET_REQUIRED_KEYS, RESET_OPTIONAL_KEYS)
        idx = reset.get("idx")
        self.expect("reset-keys", type(idx) is int and idx == self.task_id,
                    f"reset idx must be the task id {self.task_id}, got {idx!r}")
        self.expect("reset-keys", reset.get("task_mode") in TASK_MODES,
                    f"task_mode must be 'persona' or 'standard', got {reset.get('task_mode')!r}")
        if self.persona is not None:
            wanted = task_mode(self.persona)
            self.expect("reset-keys", reset.get("task_mode") == wanted,
                        f"persona={self.persona} must give task_mode {wanted!r}, got {reset.get('task_mode')!r}")
        self.expect("reset-keys", reset.get("interaction_mode") == self.interaction_mode,
                    f"interaction_mode must echo {self.interaction_mode!r}, got {reset.get('interaction_mode')!r}")
        self.expect("reset-keys", (reset.get("task_mode") == "persona") == bool(reset.get("user_persona")),
                    "user_persona must be non-empty exactly in persona mode")
        state = reset.get("observation_state") or {}
        self.expect("reset-page", state.get("page_type") == SEARCH_PAGE and state.get("search_available") is True
                    and state.get("actions") == [],
                    f"the first page must be the search home with search and nothing to click; got "
                    f"page_type={state.get('page_type')!r}, search_available={state.get('search_available')!r}, "
                    f"actions={state.get('actions')!r}")
        self.expect("reset-page", self.env.done is False, "done must be False right after reset")

    def check_step(self, result: Any, action: str) -> None:
        if not self.expect("step-keys", isinstance(result, dict),
                           f"step must return a dict, got {type(result).__name__}"):
            raise _Abort
        self.check_keys("step-keys", f"step({action!r})", result, STEP_REQUIRED_KEYS, STEP_OPTIONAL_KEYS)
        done = result.get("done")
        self.expect("step-keys", result.get("over") == done, f"over ({result.get('over')!r}) must equal done ({done!r})")
        self.expect("step-keys", ("termination_reason" in result) == bool(done),
                    "termination_reason must be present exactly when done")
        if done:
            self.expect("step-keys", result.get("termination_reason") in END_REASONS,
                        f"termination_reason must be one of {END_REASONS}, got {result.get('termination_reason')!r}")
        else:
            empty = {key: result.get(key) for key in ("reward_detail", "purchase", "goal") if result.get(key) != {}}
            self.expect("step-keys", result.get("reward") == 0.0 and not empty,
                        f"before the end the reward must be 0.0 and reward_detail/purchase/goal empty; got "
                        f"reward={result.get('reward')!r}, non-empty {sorted(empty)}")
        feedback = result.get("action_feedback")
        if self.expect("step-keys", isinstance(feedback, dict), f"a step's action_feedback must be a dict, "
                                                               f"got {type(feedback).__name__}"):
            assert isinstance(feedback, dict)
            self.expect("step-keys", feedback.get("action") == action and isinstance(feedback.get("valid"), bool)
                        and isinstance(feedback.get("reason"), str) and isinstance(feedback.get("message"), str),
                        f"action_feedback must echo the action and carry valid/reason/message; got {feedback!r}")
            self.expect("step-keys", result.get("message") == (CONTINUE_MESSAGE if feedback.get("valid")
                                                               else INVALID_MESSAGE),
                        f"message must be 'Continue interaction' after a valid action and 'Invalid action' "
                        f"otherwise; got {result.get('message')!r} for valid={feedback.get('valid')!r}")
        self.expect("done-flag", self.env.done == done, f"env.done is {self.env.done!r} but the step said {done!r}")

    def check_keys(self, rule: str, what: str, result: Mapping[str, Any], required: frozenset[str],
                   optional: frozenset[str]) -> None:
        missing = sorted(required - result.keys())
        extra = sorted(result.keys() - required - optional)
        self.expect(rule, not missing and not extra, f"{what} keys: missing {missing}, unexpected {extra}")
        wrong = {key: type(value).__name__ for key, value in result.items()
                 if key in _TYPES and (not isinstance(value, _TYPES[key]) or (isinstance(value, bool)
                                       and bool not in _TYPES[key]))}
        self.expect(rule, not wrong, f"{what} value types are wrong: {wrong}")

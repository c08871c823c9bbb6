"""``check_env``: does an implementation keep the environment contract? (the spirit of Gymnasium's checker)

Any object claiming to be a shopping environment (``ShopEnv``, the HTTP clients, a user's wrapper) is
driven through one short episode of a real task, and each observed behaviour is checked against a named
rule of the contract (docs/contract.md#environment-interface). Every broken rule is reported, not only
the first, in one :class:`EnvCheckError` whose message names the rules; ``skip`` leaves out rules a caller
knows an implementation does not keep yet. The rule book (the failures recorded, the rules on one result's
keys and types) is ``_result_rules``; this module drives the episode.

Rules, in the order they are checked:

``interface``              the object satisfies ``ShopEnvironment`` or ``AsyncShopEnvironment`` (all I/O
                           methods sync, or all coroutines)
``reset-keys``             reset returns exactly the documented keys with the documented types
``reset-page``             the first page is the search home: search offered, nothing to click, not done
``tools-consistent``       ``tools()`` offers ``search`` iff the page does, and ``click``'s enum equals the
                           page's clickables in order; ``observation_state()`` equals the last result's
``results-not-shared``     ``observation_state()`` never hands out the object the caller already holds
``step-keys``              step returns exactly the documented keys with the documented types; the
                           feedback echoes the action; not done means zero reward and empty goal/purchase
``done-flag``              the ``done`` property agrees with the last result
``invalid-action``         an unavailable click is answered (not raised): invalid, same page
``terminate``              terminate ends the episode: done, zero reward, the reason, the terminal page,
                           no tools
``terminate-reference``    the reference's terminate result: no ``action_feedback``, message
                           ``Episode terminated: <reason>``
``step-after-end``         step and terminate after the end raise a ``ShopSimError``
``step-after-end-typed``   ... and that error is an ``EpisodeStateError`` (``episode_terminated``)
``determinism``            two identical resets (and the same first step after each) give equal results
                           (whole dicts; a step's ``idx`` names the session and is left out)
``unknown-task-typed``     a reset of a task id that does not exist raises ``RequestError`` (``unknown_task``)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Collection, Coroutine, Mapping
from typing import Any, TypeVar

from ..contract import (
    BUY_NOW,
    CLICK_TOOL,
    INVALID_MESSAGE,
    SEARCH_TOOL,
    SINGLE_TURN,
    TERMINAL,
    VALUE_ARGUMENT,
    format_action,
    terminated_message,
)
from ..errors import EpisodeStateError, RequestError, ShopSimError
from ._result_rules import RULES, SEARCH_PAGE, ResultRules, RuleFailure, _Abort
from .interface import (
    ASYNC_METHODS,
    PER_PATH_FIELDS,
    TERMINATE_OPTIONAL_KEYS,
    TERMINATE_REQUIRED_KEYS,
    TERMINATION_REASONS,
    AsyncShopEnvironment,
    ShopEnvironment,
)

UNKNOWN_TASK_ID = -1  # task ids are non-negative (docs/contract.md#reset)
UNAVAILABLE_CLICK = format_action(CLICK_TOOL, "no such clickable value")
TERMINAL_PAGE = TERMINAL

T = TypeVar("T")


class EnvCheckError(ShopSimError, AssertionError):
    """An environment breaks one or more rules of the contract; ``failures`` lists them in check order."""

    def __init__(self, env: object, failures: list[RuleFailure]) -> None:
        self.failures = tuple(failures)
        self.rules = tuple(dict.fromkeys(failure.rule for failure in failures))
        lines = "\n".join(f"  {failure}" for failure in failures)
        super().__init__(
            f"{type(env).__name__} breaks {len(self.rules)} environment rule(s) "
            f"({', '.join(self.rules)}):\n{lines}")


class _Checker(ResultRules):
    """One episode driven through ``env``, each behaviour checked against its rule."""

    async def call(self, rule: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """``env.name(*args)``, awaited when it is a coroutine; an exception is a failure of ``rule``."""
        try:
            return await _maybe_await(getattr(self.env, name)(*args, **kwargs))
        except Exception as exc:
            self.failures.append(RuleFailure(rule, f"{name}{_show_args(args, kwargs)} raised "
                                                   f"{type(exc).__name__}: {exc}"))
            raise _Abort from exc

    # ----------------------------------------------------------------- the episode
    async def run(self) -> None:
        env = self.env
        if not self.interface_ok():
            raise _Abort
        reset = await self.reset()
        self.check_reset(reset)
        await self.check_page(reset, "reset")

        invalid = await self.call("invalid-action", "step", UNAVAILABLE_CLICK)
        self.check_step(invalid, UNAVAILABLE_CLICK)
        feedback = invalid.get("action_feedback") or {}
        self.expect("invalid-action", feedback.get("valid") is False and invalid.get("done") is False
                    and invalid.get("message") == INVALID_MESSAGE,
                    f"an unavailable click must be answered as invalid and keep the episode going; got "
                    f"message={invalid.get('message')!r}, done={invalid.get('done')!r}, feedback={feedback!r}")
        self.expect("invalid-action", _page(invalid) == SEARCH_PAGE,
                    f"an invalid action must not change the page; now on {_page(invalid)!r}")

        search = format_action(SEARCH_TOOL, _query_from(reset.get("task_instruction")))
        results = await self.call("step-keys", "step", search)
        self.check_step(results, search)
        await self.check_page(results, search)
        first = next((value for value in _actions(results) if value.isascii() and value.isalnum()), None)
        if first is not None and not results.get("done"):
            click = format_action(CLICK_TOOL, first)
            product = await self.call("step-keys", "step", click)
            self.check_step(product, click)
            await self.check_page(product, click)

        if not env.done:
            await self.check_terminate()
        await self.check_after_end()
        await self.check_determinism(search)
        await self.check_unknown_task()

    def interface_ok(self) -> bool:
        env = self.env
        is_sync = isinstance(env, ShopEnvironment)
        is_async = isinstance(env, AsyncShopEnvironment)
        if not self.expect("interface", is_sync or is_async,
                           f"missing members of the environment protocol: {_missing_members(env)}"):
            return False
        kinds = {name: inspect.iscoroutinefunction(getattr(env, name)) for name in sorted(ASYNC_METHODS)}
        return self.expect("interface", len(set(kinds.values())) == 1,
                           f"reset/step/terminate/close must be all plain methods or all coroutines; got {kinds}")

    async def reset(self) -> dict[str, Any]:
        result = await self.call("reset-keys", "reset", self.task_id, persona=self.persona,
                                 interaction_mode=self.interaction_mode)
        if not isinstance(result, dict):
            self.expect("reset-keys", False, f"reset must return a dict, got {type(result).__name__}")
            raise _Abort
        return result

    async def check_page(self, result: Mapping[str, Any], after: str) -> None:
        """tools() and observation_state() describe the page the result shows."""
        state = result.get("observation_state")
        current = await self.call("tools-consistent", "observation_state")
        self.expect("tools-consistent", current == state,
                    f"observation_state() after {after} differs from the result's observation_state")
        self.expect("results-not-shared", current is not state and not _shares_lists(current, state),
                    f"observation_state() after {after} returns the object already handed out with the result "
                    f"(a caller mutating one changes the other)")
        tools = await self.call("tools-consistent", "tools")
        names = [tool.get("function", {}).get("name") for tool in tools] if isinstance(tools, list) else None
        actions = _actions(result)
        expected = (([SEARCH_TOOL] if (state or {}).get("search_available") is True else [])
                    + ([CLICK_TOOL] if actions else []))
        self.expect("tools-consistent", names == expected,
                    f"after {after} the tools must be {expected} (search offered: "
                    f"{(state or {}).get('search_available')!r}, {len(actions)} clickables), got {names}")
        if names and CLICK_TOOL in names:
            click = tools[names.index(CLICK_TOOL)]
            enum = click.get("function", {}).get("parameters", {}).get("properties", {}).get(VALUE_ARGUMENT, {}).get("enum")
            self.expect("tools-consistent", enum == actions,
                        f"after {after} the click enum must equal the page's clickables in order: "
                        f"enum={enum!r}, actions={actions!r}")

    async def check_terminate(self) -> None:
        reason = TERMINATION_REASONS[0]
        result = await self.call("terminate", "terminate", reason)
        if not self.expect("terminate", isinstance(result, dict),
                           f"terminate must return a dict, got {type(result).__name__}"):
            raise _Abort
        self.check_keys("terminate", "terminate", result, TERMINATE_REQUIRED_KEYS, TERMINATE_OPTIONAL_KEYS)
        state = result.get("observation_state") or {}
        self.expect("terminate", result.get("done") is True and result.get("over") is True
                    and result.get("reward") == 0.0 and result.get("termination_reason") == reason,
                    f"terminate({reason!r}) must give done/over True, reward 0.0 and termination_reason "
                    f"{reason!r}; got done={result.get('done')!r}, over={result.get('over')!r}, "
                    f"reward={result.get('reward')!r}, termination_reason={result.get('termination_reason')!r}")
        self.expect("terminate", state.get("page_type") == TERMINAL_PAGE and state.get("actions") == []
                    and state.get("search_available") is False,
                    f"terminate must show the terminal page with nothing to do; got page_type="
                    f"{state.get('page_type')!r}, actions={state.get('actions')!r}")
        self.expect("terminate", self.env.done is True, "env.done must be True after terminate")
        tools = await self.call("terminate", "tools")
        self.expect("terminate", tools == [], f"no tools after the end, got {len(tools)}")
        self.expect("terminate-reference", "action_feedback" not in result,
                    f"the reference terminate result has no action_feedback (no action was taken); got "
                    f"{result.get('action_feedback')!r}")
        self.expect("terminate-reference", result.get("message") == terminated_message(reason),
                    f"the reference terminate message is {terminated_message(reason)!r}, got "
                    f"{result.get('message')!r}")

    async def check_after_end(self) -> None:
        for name, args in (("step", (format_action(CLICK_TOOL, BUY_NOW),)), ("terminate", (TERMINATION_REASONS[0],))):
            try:
                await _maybe_await(getattr(self.env, name)(*args))
            except ShopSimError as exc:
                self.expect("step-after-end", True, "")
                self.expect("step-after-end-typed", isinstance(exc, EpisodeStateError)
                            and exc.code == "episode_terminated", f"{name} after the end must raise "
                            f"EpisodeStateError(episode_terminated), got {type(exc).__name__}: {exc}")
            except Exception as exc:
                self.expect("step-after-end", False,
                            f"{name} after the end must raise a ShopSimError, got {type(exc).__name__}: {exc}")
            else:
                self.expect("step-after-end", False, f"{name} after the end must raise, but it returned")

    async def check_determinism(self, action: str) -> None:
        first = await self.reset()
        first_step = await self.call("determinism", "step", action)
        second = await self.reset()
        second_step = await self.call("determinism", "step", action)
        self.expect("determinism", first == second,
                    f"two resets of task {self.task_id} differ in {_differing_keys(first, second)}")
        # ``idx`` of a step names the session (``slot-<n>-<task>`` behind the service), not the episode
        first_step, second_step = (_without(step, PER_PATH_FIELDS) for step in (first_step, second_step))
        self.expect("determinism", first_step == second_step,
                    f"the same first step after two identical resets differs in "
                    f"{_differing_keys(first_step, second_step)}")

    async def check_unknown_task(self) -> None:
        if "unknown-task-typed" in self.skip:
            return
        try:
            await _maybe_await(self.env.reset(UNKNOWN_TASK_ID))
        except RequestError as exc:
            self.expect("unknown-task-typed", exc.code == "unknown_task",
                        f"reset({UNKNOWN_TASK_ID}) must raise RequestError(unknown_task), got {exc.code}: {exc}")
        except Exception as exc:
            self.expect("unknown-task-typed", False, f"reset({UNKNOWN_TASK_ID}) must raise RequestError, "
                                                     f"got {type(exc).__name__}: {exc}")
        else:
            self.expect("unknown-task-typed", False, f"reset({UNKNOWN_TASK_ID}) must raise, but it returned")

def check_env(env: object, task_id: int, *, persona: bool | None = None, interaction_mode: str = SINGLE_TURN,
              skip: Collection[str] = ()) -> tuple[str, ...]:
    """Drive ``env`` through one episode of ``task_id`` and check every rule of the environment contract.

    Args:
        env: a ``ShopEnvironment`` (for an ``AsyncShopEnvironment`` await :func:`check_env_async`).
        task_id: an active task of the environment's catalog (its episode is played, then reset twice).
        persona: the mode to reset in (None: the task's own mode).
        interaction_mode: the episode length mode to reset in.
        skip: rule names (see ``RULES``) not to check.

    Returns:
        The names of the rules that were checked and kept, in check order.

    Raises:
        EnvCheckError: naming every broken rule with what was observed.
    """
    if _is_async(env):  # its connections belong to the caller's event loop: run it there
        raise ShopSimError(f"{type(env).__name__} is asynchronous: use `await check_env_async(env, task_id)`")
    checker = _Checker(env, task_id, persona, interaction_mode, skip)
    _run_sync(_drive(checker))
    return tuple(checker.checked)


async def check_env_async(env: object, task_id: int, *, persona: bool | None = None,
                          interaction_mode: str = SINGLE_TURN, skip: Collection[str] = ()) -> tuple[str, ...]:
    """:func:`check_env` for an ``AsyncShopEnvironment`` (a synchronous one is accepted too), in the caller's
    event loop."""
    checker = _Checker(env, task_id, persona, interaction_mode, skip)
    await _drive(checker)
    return tuple(checker.checked)


async def _drive(checker: _Checker) -> None:
    with contextlib.suppress(_Abort):  # the failure that aborted the episode is already recorded
        await checker.run()
    if checker.failures:
        raise EnvCheckError(checker.env, checker.failures)


def _run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a synchronous env's calls return at once) without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coroutine.close()
    raise ShopSimError("check_env: a synchronous environment returned an awaitable; use check_env_async")


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


def _is_async(env: object) -> bool:
    return inspect.iscoroutinefunction(getattr(env, "reset", None))


def _missing_members(env: object) -> list[str]:
    names = ("reset", "step", "terminate", "tools", "observation_state", "done", "close")
    return [name for name in names if not hasattr(env, name)]


def _show_args(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    parts = [repr(arg) for arg in args] + [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"({', '.join(parts)})"


def _page(result: Mapping[str, Any]) -> object:
    return (result.get("observation_state") or {}).get("page_type")


def _actions(result: Mapping[str, Any]) -> list[str]:
    actions = (result.get("observation_state") or {}).get("actions")
    return list(actions) if isinstance(actions, list) else []


def _query_from(instruction: object) -> str:
    """A short query from the visible instruction, so the search finds something on any catalog."""
    text = "".join(ch for ch in str(instruction or "") if ch.isalnum())
    return text[:8] or "商品"


def _shares_lists(left: object, right: object) -> bool:
    if not isinstance(left, dict) or not isinstance(right, dict):
        return False
    return any(isinstance(value, (list, dict)) and value is right.get(key) for key, value in left.items())


def _without(result: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key not in fields}


def _differing_keys(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[str]:
    return sorted(key for key in left.keys() | right.keys() if left.get(key) != right.get(key))


__all__ = ["RULES", "EnvCheckError", "RuleFailure", "check_env", "check_env_async"]

"""The environment interface (issue 12 item 1): every implementation has the declared shape.

Structural at run time (``runtime_checkable`` plus a signature comparison, since ``isinstance`` only checks
that the names exist) and statically through mypy (``tests/typing_interface.py``, run by test_typecheck.py).
"""

from __future__ import annotations

import inspect
import types
import typing

import pytest

from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import (
    AsyncShopEnvironment,
    ResetResult,
    ShopEnv,
    ShopEnvironment,
    StepResult,
    TerminateResult,
)
from shopsimrl.env.gym import ShopGymEnv
from shopsimrl.env.interface import (
    ASYNC_METHODS,
    DIALOGUE_RESET_KEYS,
    DIALOGUE_STEP_KEYS,
    PROTOCOL_METHODS,
    RESET_OPTIONAL_KEYS,
    RESET_REQUIRED_KEYS,
    STEP_OPTIONAL_KEYS,
    STEP_REQUIRED_KEYS,
)
from shopsimrl.server import AsyncShopClient, ShopClient, models

SYNC = [ShopEnv, ShopClient]
ASYNC = [AsyncShopClient]


def _protocol_parameters(protocol: type, name: str) -> list[inspect.Parameter]:
    return list(inspect.signature(getattr(protocol, name)).parameters.values())[1:]  # without self


@pytest.mark.parametrize(("cls", "protocol"), [(cls, ShopEnvironment) for cls in SYNC]
                         + [(cls, AsyncShopEnvironment) for cls in ASYNC])
def test_signatures_match_the_protocol(cls, protocol):
    """Each protocol parameter exists with the same kind and default; extras must be optional keywords."""
    for name in PROTOCOL_METHODS:
        implementation = getattr(cls, name)
        assert inspect.iscoroutinefunction(implementation) == (
            protocol is AsyncShopEnvironment and name in ASYNC_METHODS), f"{cls.__name__}.{name} sync/async"
        actual = dict(list(inspect.signature(implementation).parameters.items())[1:])
        for wanted in _protocol_parameters(protocol, name):
            got = actual.pop(wanted.name, None)
            assert got is not None, f"{cls.__name__}.{name} lacks parameter {wanted.name!r}"
            assert (got.kind, got.default) == (wanted.kind, wanted.default), f"{cls.__name__}.{name}({wanted.name})"
        extras = [p for p in actual.values() if p.kind is not p.KEYWORD_ONLY or p.default is p.empty]
        assert not extras, f"{cls.__name__}.{name} has extra required or positional parameters {extras}"
    assert isinstance(inspect.getattr_static(cls, "done"), property), f"{cls.__name__}.done must be a property"


def test_runtime_checkable_protocols(prepared_dir):
    env = ShopEnv.from_data_dir(prepared_dir, shoppers=shopper_registry())
    client = ShopClient("http://127.0.0.1:9")  # nothing is sent before reset
    aclient = AsyncShopClient("http://127.0.0.1:9")
    try:
        assert isinstance(env, ShopEnvironment) and isinstance(client, ShopEnvironment)
        assert isinstance(aclient, AsyncShopEnvironment)
        # the Gymnasium wrapper has Gymnasium's API (reset(seed, options) -> (obs, info)); it wraps a ShopEnv
        gym_env = ShopGymEnv(env.world)
        assert not isinstance(gym_env, ShopEnvironment) and isinstance(gym_env.env, ShopEnvironment)
        assert not isinstance(object(), ShopEnvironment) and not isinstance(object(), AsyncShopEnvironment)
    finally:
        client._http.close()


def test_server_models_carry_the_same_keys():
    """The /v1 response models are written apart from the TypedDicts (their field descriptions and nullable
    optionals make the OpenAPI document): they must list the same keys, plus the lease fields of a created
    session."""
    assert set(models.StepResult.model_fields) == STEP_REQUIRED_KEYS | STEP_OPTIONAL_KEYS
    assert set(models.SessionCreated.model_fields) == RESET_REQUIRED_KEYS | RESET_OPTIONAL_KEYS | {
        "session_id", "env_idx"}


def _shape(hint) -> frozenset[str]:
    """A type as the JSON it admits: a TypedDict is an object (``dict[str, Any]``), a ``Literal`` of strings
    is a string (the models may narrow or widen the vocabulary; the contract tests check the values)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return frozenset().union(*(_shape(arg) for arg in args))
    if origin is typing.Literal:
        return frozenset(type(arg).__name__ for arg in args)
    if typing.is_typeddict(hint) or hint is dict:
        return frozenset({"dict[str, Any]"})
    if origin in (list, dict):
        inner = ", ".join("|".join(sorted(_shape(arg))) for arg in args)
        return frozenset({f"{origin.__name__}[{inner}]"})
    if hint is type(None):
        return frozenset({"None"})
    if hint is typing.Any:
        return frozenset({"Any"})
    return frozenset({hint.__name__})


@pytest.mark.parametrize(("model", "typed_dicts"), [
    (models.StepResult, (StepResult, TerminateResult)),  # /v1 answers step and terminate with one model
    (models.SessionCreated, (ResetResult,)),
])
def test_server_models_agree_with_the_typed_dicts_type_for_type(model, typed_dicts):
    """Each result key has the same JSON type in the /v1 model as in the TypedDict (nullable exactly where the
    key is optional in one of the results the model serves), and is required in the model exactly when every
    such result requires it."""
    fields = model.model_fields
    for typed in typed_dicts:
        hints = typing.get_type_hints(typed)
        for key, hint in hints.items():
            field = fields[key]
            wanted = _shape(hint)
            optional_somewhere = any(key not in other.__required_keys__ for other in typed_dicts)
            if optional_somewhere:
                wanted |= {"None"}
            got = _shape(field.annotation)
            # an optional key may be typed ``T | None`` in the model although the TypedDict says ``T``
            assert got == wanted or (optional_somewhere and got == wanted | {"None"}), (
                f"{model.__name__}.{key}: model {field.annotation} vs {typed.__name__} {hint}")
            assert field.is_required() == (not optional_somewhere), f"{model.__name__}.{key} required-ness"


def test_the_type_comparison_can_fail():
    """``_shape`` tells apart the differences the agreement test must catch."""
    assert _shape(int) != _shape(str) and _shape(int | None) != _shape(int)
    assert _shape(list[str]) != _shape(list[int]) and _shape(dict[str, typing.Any]) != _shape(list[str])
    assert _shape(typing.Literal["a", "b"]) == _shape(str) and _shape(ResetResult) == _shape(dict[str, typing.Any])


def _conforms(value, hint) -> bool:
    """``value`` has the type ``hint`` (the subset of typing the result types use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, arg) for arg in args)
    if typing.is_typeddict(hint):
        return _typeddict_problems(value, hint) == []
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(_conforms(key, args[0]) and _conforms(item, args[1])
                                               for key, item in value.items())
    if hint is float:
        return isinstance(value, float)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _typeddict_problems(value, typed) -> list[str]:
    if not isinstance(value, dict):
        return [f"not a dict: {type(value).__name__}"]
    hints = typing.get_type_hints(typed)
    problems = [f"missing {key}" for key in sorted(typed.__required_keys__ - value.keys())]
    problems += [f"unexpected {key}" for key in sorted(value.keys() - hints.keys())]
    problems += [f"{key}={value[key]!r} is not {hints[key]}" for key in sorted(value.keys() & hints.keys())
                 if not _conforms(value[key], hints[key])]
    return problems


def test_shop_env_results_are_exactly_the_declared_types(prepared_dir):
    """Every key and value of real results, on every kind of step, against the TypedDicts."""
    env = ShopEnv.from_data_dir(prepared_dir, shoppers=shopper_registry())
    reset = env.reset(0, include_private_goal=True)
    assert reset.keys() == RESET_REQUIRED_KEYS | RESET_OPTIONAL_KEYS - DIALOGUE_RESET_KEYS
    dialogue = ShopEnv.from_data_dir(prepared_dir, shoppers=shopper_registry())
    assert dialogue.reset(0, include_private_goal=True, shopper="rule").keys() == RESET_REQUIRED_KEYS | RESET_OPTIONAL_KEYS
    asked = dialogue.step("ask_user[预算是多少？]")
    assert asked.keys() >= DIALOGUE_STEP_KEYS and _typeddict_problems(asked, StepResult) == []
    assert _typeddict_problems(dialogue.terminate("action_limit"), TerminateResult) == []
    assert _typeddict_problems(reset, ResetResult) == []
    assert _typeddict_problems(env.reset(1, persona=False), ResetResult) == []
    steps = [env.step(action) for action in (
        "click[nothing]", "search[可移动小吃车 煤气灶 三个锅]", "click[824100258497]", "click[buy now]",
        "click[颜色分类=三锅小吃车煮面炉＋关东煮＋油炸]", "click[buy now]")]
    assert steps[3]["action_feedback"]["missing_option_axes"] and steps[-1]["termination_reason"] == "purchase"
    for step in steps:
        assert _typeddict_problems(step, StepResult) == [], step["action_feedback"]
    env.reset(1)
    assert _typeddict_problems(env.terminate("generation_length"), TerminateResult) == []
    # the validator can fail: a wrong value type, a missing and an unexpected key are all named
    # the reference's reward types: the int 0 after an invalid action, 0.0 after a valid one (issue 28 item 6)
    assert steps[0]["message"] == "Invalid action" and type(steps[0]["reward"]) is int and steps[0]["reward"] == 0
    assert steps[1]["message"] == "Continue interaction" and type(steps[1]["reward"]) is float
    broken = {**steps[0], "reward": "1", "extra": 0}
    del broken["over"]
    assert _typeddict_problems(broken, StepResult) == ["missing over", "unexpected extra",
                                                        "reward='1' is not float | int"]


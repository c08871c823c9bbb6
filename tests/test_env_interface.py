"""The environment interface (issue 12 item 1): every implementation has the declared shape.

Structural at run time (``runtime_checkable`` plus a signature comparison, since ``isinstance`` only checks
that the names exist) and statically through mypy (``tests/typing_interface.py``, run by test_typecheck.py).
"""

from __future__ import annotations

import inspect

import pytest

from shopsimrl.env import AsyncShopEnvironment, ShopEnv, ShopEnvironment
from shopsimrl.env.gym import ShopGymEnv
from shopsimrl.env.interface import (
    ASYNC_METHODS,
    PROTOCOL_METHODS,
    RESET_OPTIONAL_KEYS,
    RESET_REQUIRED_KEYS,
    STEP_OPTIONAL_KEYS,
    STEP_REQUIRED_KEYS,
)
from shopsimrl.server import models
from shopsimrl.server.client import AsyncShopClient, ShopClient

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
    env = ShopEnv.from_data_dir(prepared_dir)
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
    """The /v1 response models are not derived from the TypedDicts yet (next phase): until then they must
    list the same keys, plus the lease fields of a created session."""
    assert set(models.StepResult.model_fields) == STEP_REQUIRED_KEYS | STEP_OPTIONAL_KEYS
    assert set(models.SessionCreated.model_fields) == RESET_REQUIRED_KEYS | RESET_OPTIONAL_KEYS | {
        "session_id", "env_idx"}

"""Static conformance of the environment implementations to the declared interface (checked by mypy).

Not a pytest module: ``tests/test_typecheck.py`` runs mypy (strict, see pyproject.toml) over this file.
Each assignment below type-checks exactly when the class conforms to the protocol statically. ``ShopEnv``
returns the TypedDicts of ``shopsimrl.env.interface``; the HTTP clients still annotate their results as
``dict[str, Any]``, so their lines carry a ``type: ignore``; mypy's ``warn_unused_ignores`` turns each one into
an error once its class conforms, so the ignores cannot outlive the gap.
"""

from __future__ import annotations

from shopsimrl.env import ShopEnv
from shopsimrl.env.interface import (
    AsyncShopEnvironment,
    ResetResult,
    ShopEnvironment,
    StepResult,
    TerminateResult,
)
from shopsimrl.server import AsyncShopClient, ShopClient


def sync_implementations(env: ShopEnv, client: ShopClient) -> list[ShopEnvironment]:
    in_process: ShopEnvironment = env  # ShopEnv returns the TypedDicts
    over_http: ShopEnvironment = client  # type: ignore[assignment]  # same
    return [in_process, over_http]


def async_implementations(client: AsyncShopClient) -> list[AsyncShopEnvironment]:
    over_http: AsyncShopEnvironment = client  # type: ignore[assignment]  # same
    return [over_http]


def sync_episode(env: ShopEnvironment) -> tuple[ResetResult, StepResult, TerminateResult]:
    """What a runtime written against the interface can rely on (the keys are checked by mypy)."""
    reset = env.reset(0, persona=None)
    step = env.step(f"search[{reset['task_instruction'][:8]}]")
    if step["done"]:
        return reset, step, {**step, "termination_reason": "action_limit"}
    return reset, step, env.terminate("generation_length")


async def async_episode(env: AsyncShopEnvironment) -> tuple[ResetResult, StepResult, TerminateResult]:
    reset = await env.reset(0)
    step = await env.step("click[back to search]")
    end = await env.terminate()
    await env.close()
    return reset, step, end

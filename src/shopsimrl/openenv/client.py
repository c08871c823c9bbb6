"""``ShopSimClient``: OpenEnv's ``EnvClient`` for a ``shopsimrl serve-openenv`` server (one WebSocket episode)."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import ShopSimAction, ShopSimObservation, ShopSimState


class ShopSimClient(EnvClient[ShopSimAction, ShopSimObservation, ShopSimState]):
    """``async with ShopSimClient(base_url=url) as env: await env.reset(task_id=…); await env.step(action)``."""

    def _step_payload(self, action: ShopSimAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ShopSimObservation]:
        fields = dict(payload.get("observation") or {})
        fields.update(done=payload.get("done", False), reward=payload.get("reward"),
                      metadata=payload.get("metadata") or fields.get("metadata") or {})
        observation = ShopSimObservation.model_validate(fields)
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> ShopSimState:
        return ShopSimState.model_validate(payload)

"""verl adapter: an agent loop (``AgentLoopBase.run``) that plays one shop episode per sample.

verl trains one token sequence per sample, so the rollout core runs in *append* mode: the exact sampled tokens
stay in the sequence and only the rendered new messages (tool results, repair feedback, the next assistant
header) are appended with mask 0. ``run`` returns ``prompt_ids`` (the first prompt), ``response_ids`` (all
later tokens), ``response_mask`` (1 on sampled tokens), ``response_logprobs`` and ``reward_score`` = r_strict.

Register it in an agent-loop config file (``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: shopsim
      _target_: shopsimrl.train.verl.ShopAgentLoop

and give every dataset row ``agent_name: shopsim`` and ``extra_info: {task_id: N}``. The environment comes from
``SHOPSIM_ENV_URL`` (a ``shopsimrl serve``) or ``SHOPSIM_DATA`` (an in-process catalog directory).

Importing this module needs no verl; ``ShopAgentLoop`` imports verl on first access and names the extra.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

from ..agent.runtime import EnvironmentFactory, InProcessEnvironment, ServiceEnvironment
from ..errors import ShopSimError
from .rollout import Generation, RolloutConfig, RolloutContext, Trajectory, run_rollout

INSTALL_HINT = "verl is not installed: `pip install 'shopsimrl[train]' verl` (verl needs a GPU machine to train)"


class VerlAdapterError(ShopSimError):
    """verl is missing, or a sample/config the agent loop cannot use."""


def environment_from_env() -> EnvironmentFactory:
    url, data = os.environ.get("SHOPSIM_ENV_URL"), os.environ.get("SHOPSIM_DATA")
    if url:
        return ServiceEnvironment(url)
    if data:
        from ..env.shop_env import ShopWorld

        return InProcessEnvironment(ShopWorld.shared(data), threaded=True)
    raise VerlAdapterError("set SHOPSIM_ENV_URL (a `shopsimrl serve` URL) or SHOPSIM_DATA (a catalog directory)")


def task_id_of(kwargs: Mapping[str, Any]) -> int:
    extra = kwargs.get("extra_info") or {}
    raw = extra.get("task_id", kwargs.get("task_id")) if isinstance(extra, Mapping) else kwargs.get("task_id")
    try:
        return int(raw)
    except (TypeError, ValueError) as exc:
        raise VerlAdapterError("a shopsim row needs extra_info.task_id") from exc


def _generation(out: Any) -> Generation:
    """verl's server manager returns a ``TokenOutput`` (token_ids, log_probs, stop reason) or, in older
    versions, a bare list of ids."""
    if isinstance(out, (list, tuple)):
        return Generation(list(out), [0.0] * len(out), "stop")
    ids = list(out.token_ids)
    log_probs = getattr(out, "log_probs", None)
    reason = getattr(out, "stop_reason", None) or getattr(out, "finish_reason", None) or "stop"
    reason = {"completed": "stop", "aborted": "abort"}.get(str(reason), str(reason))
    return Generation(ids, list(log_probs) if log_probs is not None else [0.0] * len(ids), reason)


def output_fields(trajectory: Trajectory, response_length: int | None = None) -> dict[str, Any]:
    """The AgentLoopOutput fields of one trajectory (one segment in append mode)."""
    if not trajectory.scored or not trajectory.segments:
        raise VerlAdapterError(f"episode aborted: {trajectory.error}")
    segment = trajectory.segments[0]
    response = segment.response_tokens
    mask, log_probs = segment.response_mask, segment.response_log_probs
    if response_length is not None and len(response) > response_length:
        response, mask, log_probs = response[:response_length], mask[:response_length], log_probs[:response_length]
    return {
        "prompt_ids": segment.tokens[: segment.prompt_length], "response_ids": response, "response_mask": mask,
        "response_logprobs": log_probs, "num_turns": len(trajectory.steps) * 2 + 1,
        "reward_score": trajectory.reward,
        "extra_fields": {"reward_detail": trajectory.reward_detail, "status": trajectory.status,
                         "termination_reason": trajectory.metadata.get("termination_reason")},
    }


class ShopAgentLoopCore:
    """The trainer-free part of the agent loop (the verl subclass only wraps the output type)."""

    def __init__(self, server_manager: Any, tokenizer: Any, *, environment: EnvironmentFactory | None = None,
                 response_length: int | None = None, max_steps: int = 30) -> None:
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.environment = environment
        self.response_length = response_length
        self.max_steps = max_steps

    async def run_fields(self, sampling_params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        request_id = uuid.uuid4().hex  # one id per episode: the server keeps its prefix cache warm

        async def generate(prompt_ids: list[int]) -> Generation:
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids,
                                                     sampling_params=sampling_params)
            return _generation(out)

        environment = self.environment or environment_from_env()
        trajectory = await run_rollout(RolloutContext(task_id_of(kwargs)), self.tokenizer, generate, environment,
                                       config=RolloutConfig(mode="append", max_steps=self.max_steps))
        return output_fields(trajectory, self.response_length)


def _build_class() -> type:
    try:
        from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
    except ImportError as exc:
        raise VerlAdapterError(INSTALL_HINT) from exc

    class ShopAgentLoop(AgentLoopBase):  # type: ignore[misc, valid-type]
        """verl agent loop over the shop environment."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            rollout = getattr(getattr(self, "config", None), "actor_rollout_ref", None)
            length = getattr(getattr(rollout, "rollout", None), "response_length", None)
            self._core = ShopAgentLoopCore(self.server_manager, self.tokenizer, response_length=length)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            fields = await self._core.run_fields(sampling_params, **kwargs)
            extra = fields.pop("extra_fields")
            try:
                return AgentLoopOutput(**fields, extra_fields=extra, metrics={})
            except TypeError:  # versions without extra_fields/metrics defaults
                return AgentLoopOutput(**fields, metrics={})

    return ShopAgentLoop


_CACHE: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "ShopAgentLoop":
        if name not in _CACHE:
            _CACHE[name] = _build_class()
        return _CACHE[name]
    raise AttributeError(name)

"""``ShopAgentLoopManager``: verl's ``AgentLoopManager`` that adds the batch health to every step's metrics.

verl 0.9.1's trainer puts nothing of a rollout's per-row fields into its *training* metrics (``reward_extra_info``
reaches only validation metrics and rollout dumps), so the protocol-error alarm would be invisible during
training. What verl does carry into every step's metrics is the manager's ``timing`` dictionary
(``RayPPOTrainer.fit``: ``timing_raw.update(gen_output.meta_info["timing"])`` → ``compute_timing_metrics``), where
verl's own agent-loop statistics live too (``timing_s/agent_loop/...``). This manager adds the batch's
``shop/protocol_error_rate`` and ``shop/protocol_error_alarm`` (:mod:`shopsimrl.train.health`) there, so every
training step logs ``timing_s/shop/protocol_error_rate`` and ``timing_s/shop/protocol_error_alarm`` (1.0 exactly when
every model turn of the batch was a protocol error; a log warning as well).

Selected with ``+actor_rollout_ref.rollout.agent.agent_loop_manager_class=shopsimrl.train.verl_manager.ShopAgentLoopManager``
(the recipe sets it). Importing this module needs no verl; the class imports verl on first access.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import AdapterError
from .health import batch_health

TURNS_KEY, ERRORS_KEY = "shopsim_turns", "shopsim_protocol_errors"
MANAGER_PATH = "shopsimrl.train.verl_manager.ShopAgentLoopManager"


def health_metrics(non_tensor_batch: Mapping[str, Any]) -> dict[str, float]:
    """The batch's protocol-error rate and alarm from the agent loop's per-row turn counts."""
    turns = non_tensor_batch.get(TURNS_KEY)
    errors = non_tensor_batch.get(ERRORS_KEY)
    if turns is None or errors is None:
        return {}
    counts = [(int(t or 0), int(e or 0)) for t, e in zip(list(turns), list(errors), strict=True)]
    return batch_health(counts, "verl agent loop")


def _build_class() -> type:
    try:
        from verl.experimental.agent_loop.agent_loop import AgentLoopManager
    except ImportError as exc:
        from .verl import install_hint

        raise AdapterError(install_hint(exc)) from exc

    class ShopAgentLoopManager(AgentLoopManager):  # type: ignore[misc]
        """verl's manager, plus the batch health in the timing dictionary verl logs every step."""

        def _performance_metrics(self, metrics: Any, output: Any) -> dict[str, float]:
            timing: dict[str, float] = super()._performance_metrics(metrics, output)
            timing.update(health_metrics(output.non_tensor_batch))
            return timing

    return ShopAgentLoopManager


_CACHE: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "ShopAgentLoopManager":
        if name not in _CACHE:
            _CACHE[name] = _build_class()
        return _CACHE[name]
    raise AttributeError(name)

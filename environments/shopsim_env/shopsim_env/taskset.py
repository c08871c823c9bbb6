"""The ShopSimRL taskset: a split's task ids with the runtime's exact system prompt and first user message.

``vf-eval shopsim-env`` resolves this package: the taskset (``ShopSimTaskset``), its env (``ShopSimEnv``: one agent
in a local subprocess runtime, no network notice added to the prompt, at most 30 turns) and its harness
(``ShopSimHarness``: verifiers' plain chat loop with MCP tools). Tools come from the shared ``ShopSimToolset``.
The rollout stops on a purchase and at 30 steps; the reward is ``r_strict`` (0 without a purchase) and every
public component is a metric.

Dialogue mode (issue 16): ``--env.taskset.shopper rule`` plays every task against the rule shopper: the prompt's
task line is the shopper's opening (the instruction is withheld), the tool server adds ``ask_user``, and a rollout
stops at 40 steps (questions count); give the agent the turns too (``--env.agent.max-turns 40``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.harnesses.null.harness import NullHarness

from shopsimrl.agent.episode import turn_limit
from shopsimrl.agent.prompt import first_user_message, system_message
from shopsimrl.contract import PURCHASE, SINGLE_TURN
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.stamps import catalog_stamps, task_set_sha256
from shopsimrl.versions import REPORTED_METRICS

from .toolset import ShopSimState, ShopSimToolset, ShopSimToolsetConfig

MAX_STEPS = turn_limit(SINGLE_TURN)


class ShopSimTasksetConfig(vf.TasksetConfig):
    data: str = "data/default"
    """Prepared data directory (``shopsimrl data build-default --out DIR`` builds the default one)."""
    split: str = "test"
    """Task split: train, val, test (and the persona splits of the catalog)."""
    persona: bool | None = None
    """None: each task in its own mode; True/False forces persona/standard."""
    shopper: str | None = None
    """Dialogue mode: ``rule`` plays every task against the rule shopper (``ask_user``; instruction withheld)."""


class ShopSimData(vf.TaskData):
    task_id: int
    persona: bool = False
    shopper: str | None = None
    step_limit: int = MAX_STEPS  # the episode's own action limit: 30, or 40 in dialogue mode
    # version stamps (shopsimrl.stamps): in every rollout of vf-eval's output, so results say what they were made on
    environment_version: str = ""
    generator_version: str | None = None
    catalog_sha256: str | None = None
    task_set_sha256: str = ""


class ShopSimTask(vf.Task[ShopSimData, ShopSimState, vf.TaskConfig]):
    @property
    def key(self) -> str:
        dialogue = f"-{self.data.shopper}" if self.data.shopper else ""
        return f"shopsim-{self.data.task_id}-{'persona' if self.data.persona else 'standard'}{dialogue}"

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        state = trace.state
        state.session = str(trace.id)
        state.task_id = self.data.task_id
        state.persona = self.data.persona
        state.shopper = self.data.shopper
        state.step_limit = self.data.step_limit

    @vf.stop
    async def episode_over(self, trace: vf.Trace) -> bool:
        """A purchase (or the engine's action limit) ends the episode; so do 30 steps (40 in dialogue mode)."""
        return trace.state.done or trace.state.steps >= trace.state.step_limit

    @vf.reward(weight=1.0)
    async def r_strict(self, trace: vf.Trace) -> float:
        state = trace.state
        return float(state.reward) if state.termination_reason == PURCHASE else 0.0

    @vf.metric
    async def components(self, trace: vf.Trace) -> dict[str, float]:
        state = trace.state
        purchased = state.termination_reason == PURCHASE
        out = {key: float(state.reward_detail.get(key) or 0.0) if purchased else 0.0
               for key in REPORTED_METRICS if key != "r_strict"}
        out.update(purchased=float(purchased), steps=float(state.steps))
        return out


class ShopSimTaskset(vf.Taskset[ShopSimTask, ShopSimTasksetConfig]):
    @classmethod
    def toolsets(cls, config: ShopSimTasksetConfig) -> list[vf.Toolset]:
        return [ShopSimToolset(ShopSimToolsetConfig(data=str(Path(config.data).resolve()), shopper=config.shopper))]

    def load(self) -> Iterator[ShopSimTask]:
        world = ShopWorld.shared(Path(self.config.data).resolve())
        env = world.new_env(shoppers=shopper_registry())
        shopper = self.config.shopper
        ids = world.catalog.split(self.config.split)
        stamps = {**catalog_stamps(world.catalog.root, world.catalog.manifest),
                  "task_set_sha256": task_set_sha256((self.config.split, t) for t in ids)}
        for task_id in ids:
            if shopper is not None:
                reset: dict[str, Any] = env.reset(task_id, persona=self.config.persona, shopper=shopper)
            else:
                reset = env.reset(task_id, persona=self.config.persona)
            visible = reset["shopper_opening"] if shopper is not None else reset["task_instruction"]
            yield ShopSimTask(
                ShopSimData(
                    id=str(task_id), name=f"task-{task_id}", task_id=task_id,
                    persona=reset["task_mode"] == "persona", shopper=shopper,
                    step_limit=turn_limit(reset["interaction_mode"]),
                    system_prompt=system_message(reset["user_persona"]),
                    prompt=first_user_message(visible, reset["observation"]), **stamps,
                ),
                self.config.task,
            )
        env.close()


class ShopSimHarness(NullHarness):
    """verifiers' plain chat loop (no bash, no code execution), the shop's MCP tools as its only tools."""


class ShopSimEnvConfig(vf.SingleAgentEnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=MAX_STEPS, network_notice=False)


class ShopSimEnv(vf.Env[ShopSimEnvConfig]):
    """The single-agent env with local defaults: ``vf-eval shopsim-env`` needs no sandbox account."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)

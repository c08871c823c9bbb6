"""``ShopToolEnvironment``: the shop as an ``environment_factory`` class for TRL 1.16's own tool loop.

TRL's contract (``GRPOTrainer(environment_factory=...)``, read from TRL 1.16.0's ``grpo_trainer.py``): one
instance per rollout, pooled and reused; ``reset(**row)`` gets every column of the dataset row and returns text
that TRL appends to the prompt's last user message; each public method is a tool whose schema TRL builds from
its type hints and Google-style docstring; ``get_reward()`` (no argument, a float) is called once per finished
rollout and logged under the class name.

What this path loses against :func:`shopsimrl.train.trl.make_rollout_func` (documented in docs/training.md):
the tool schemas are static, so the per-page ``click`` enum is not offered (the clickable values are in the
observation text, and a value outside them is an invalid action judged by the environment); TRL's own parser
decides what a tool call is, so the repair protocol (feedback JSON on a protocol error, the turn counted) does
not apply — a malformed call is TRL's ``{"error": …}`` tool message or ends the completion; a cut-off generation
is not ``terminate("generation_length")``; and the tokens are TRL's re-rendered ones, not the exact samples.

Dialogue mode: TRL builds one tool list per environment class, so :class:`ShopDialogueToolEnvironment`
adds ``ask_user`` (its description is the environment's own ``ask_user`` tool text) and plays rows whose
``shopper`` column names a shopper; ``reset`` returns the shopper's opening instead of the instruction, and a
reply comes back as the tool result, which TRL masks like every tool result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agent.policy import PERSONA_HEADER
from ..agent.prompt import SYSTEM_PROMPT, first_user_message, persona_line
from ..contract import ACTION_LIMIT
from ..env.tools import TOOLS, Tool
from ..errors import ShopSimError
from ..versions import EPISODE_LIMITS, PRIMARY_REWARD
from .rollout import parse_shopper

EPISODE_OVER = "本回合已结束，不能再调用工具。"


def _tool_method(tool: Tool) -> Callable[..., str]:
    """The environment method TRL exposes for ``tool``: its name, its one ``str`` argument and the docstring TRL
    builds the schema from, all from the environment's own tool (one definition)."""
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter(tool.argument, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)],
        return_annotation=str)

    def call(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)  # a wrong or missing argument is a TypeError, as for a def
        environment: ShopToolEnvironment = bound.arguments["self"]
        return environment._act(tool.action(bound.arguments[tool.argument]))

    call.__name__ = call.__qualname__ = tool.name
    call.__doc__ = tool.google_docstring()
    call.__annotations__ = {tool.argument: str, "return": str}
    call.__signature__ = signature  # type: ignore[attr-defined]  # what inspect.signature reads
    return call


def _install_tools(cls: type[ShopToolEnvironment]) -> None:
    for tool in TOOLS:
        if cls.dialogue or not tool.dialogue_only:
            setattr(cls, tool.name, _tool_method(tool))


class ShopToolEnvironment:
    """One shop session per rollout; ``get_reward`` is the terminal r_strict. The tools (``search``, ``click``)
    are methods installed from the environment's tool registry (:func:`_install_tools`)."""

    dialogue = False  # a class without ask_user plays single-turn rows only

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install_tools(cls)  # a subclass (ShopDialogueToolEnvironment) gets the registry's tools for its mode

    def __init__(self, world: Any, *, max_steps: int | None = None, persona: bool | None = None) -> None:
        self.world = world
        self.max_steps = max_steps  # None: the episode's own limit (30; 40 in dialogue mode)
        self.persona = persona
        self._limit = 0  # set by reset: the episode's own limit unless max_steps caps it
        self._env: Any = None
        self._final: Mapping[str, Any] | None = None
        self._steps = 0

    @classmethod
    def factory(cls, world: Any, **kwargs: Any) -> Any:
        """A zero-argument callable for ``environment_factory`` (the world is shared, read-only)."""
        return lambda: cls(world, **kwargs)

    def reset(self, **row: Any) -> str:
        """Start the row's task (``task_id`` column, else the ``prompt`` as a task id); returns the first page."""
        task = row.get("task_id", row.get("prompt"))
        if isinstance(task, list) and task and isinstance(task[-1], Mapping):
            task = task[-1].get("content")
        try:
            task_id = int(str(task).strip())
        except ValueError as exc:
            raise ShopSimError(f"row has no task id (task_id column): {task!r}") from exc
        shopper = parse_shopper(row.get("shopper"))
        if shopper is not None and not self.dialogue:
            raise ShopSimError(f"row for task {task_id} asks for the {shopper!r} shopper: use "
                               "ShopDialogueToolEnvironment, which has the ask_user tool")
        if self._env is None:
            self._env = self.world.new_env()
        if shopper is None:
            reset = self._env.reset(task_id, persona=self.persona)
        else:
            reset = self._env.reset(task_id, persona=self.persona, shopper=shopper)  # a shopper implies multi_turn
        self._final, self._steps = None, 0
        self._limit = self.max_steps or EPISODE_LIMITS[reset["interaction_mode"]]
        persona = reset.get("user_persona") or {}
        head = f"{PERSONA_HEADER}\n{persona_line(persona)}\n\n" if persona else ""
        opening = (reset.get("shopper_opening") or "") if shopper is not None else reset["task_instruction"]
        return head + first_user_message(opening, reset["observation"])

    def _act(self, action: str) -> str:
        if self._final is not None:
            return EPISODE_OVER
        result = self._env.step(action)
        self._steps += 1
        if result.get("done"):
            self._final = result
        elif self._steps >= self._limit:
            self._final = self._env.terminate(ACTION_LIMIT)
        return str(result["observation"])

    def get_reward(self) -> float:
        """The episode's r_strict (an unfinished episode is ended with ``action_limit`` first)."""
        if self._env is None:
            return 0.0
        if self._final is None:
            self._final = self._env.terminate(ACTION_LIMIT)
        return float(self._final["reward_detail"][PRIMARY_REWARD])


class ShopDialogueToolEnvironment(ShopToolEnvironment):
    """The same, plus ``ask_user``: rows with a ``shopper`` column play dialogue episodes (single-turn rows
    still work, ``ask_user`` is then an invalid action judged by the environment)."""

    dialogue = True


_install_tools(ShopToolEnvironment)  # subclasses install theirs when they are defined (__init_subclass__)


def environment_rows(task_ids: Sequence[int], *, system_prompt: str = SYSTEM_PROMPT, shopper: str | None = None
                     ) -> dict[str, list[Any]]:
    """Dataset columns for the ``environment_factory`` path: a system prompt, an empty user turn, the task id
    (and the ``shopper`` column for dialogue rows, played by :class:`ShopDialogueToolEnvironment`)."""
    rows: dict[str, list[Any]] = {
        "prompt": [[{"role": "system", "content": system_prompt}, {"role": "user", "content": ""}] for _ in task_ids],
        "task_id": [int(t) for t in task_ids]}
    shopper = parse_shopper(shopper)
    if shopper is not None:
        rows["shopper"] = [shopper for _ in task_ids]
    return rows

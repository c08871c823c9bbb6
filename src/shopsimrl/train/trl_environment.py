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

from collections.abc import Sequence
from typing import Any

from ..agent.episode_shell import EpisodeShell
from ..agent.policy import PERSONA_HEADER
from ..agent.prompt import SYSTEM_PROMPT, first_user_message, persona_line
from ..dialogue.registry import shopper_registry
from ..env.tools import TOOLS, tool_method
from ..errors import AdapterError, EpisodeStateError
from .row_codec import environment_columns, parse_environment_row, rows_of, shopper_field


def _install_tools(cls: type[ShopToolEnvironment]) -> None:
    for tool in TOOLS:
        if cls.dialogue or not tool.dialogue_only:
            # the environment's own tool: its name, argument and the docstring TRL builds the schema from
            setattr(cls, tool.name, tool_method(tool, tool.google_docstring(), ShopToolEnvironment._act))


class ShopToolEnvironment:
    """One shop session per rollout; ``get_reward`` is the terminal r_strict. The tools (``search``, ``click``)
    are methods installed from the environment's tool registry (:func:`_install_tools`)."""

    dialogue = False  # a class without ask_user plays single-turn rows only

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install_tools(cls)  # a subclass (ShopDialogueToolEnvironment) gets the registry's tools for its mode

    def __init__(self, world: Any, *, max_steps: int | None = None, persona: bool | None = None) -> None:
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0):
            raise AdapterError(f"max_steps must be None or a whole number of steps, not {max_steps!r}")
        self.world = world
        self.max_steps = max_steps  # None: the episode's own limit (30; 40 in dialogue mode); it only lowers it
        self.persona = persona
        self._env: Any = None
        self._shell: EpisodeShell | None = None

    @classmethod
    def factory(cls, world: Any, **kwargs: Any) -> Any:
        """A zero-argument callable for ``environment_factory`` (the world is shared, read-only)."""
        return lambda: cls(world, **kwargs)

    def reset(self, **row: Any) -> str:
        """Start the row's task (``task_id`` column, else the ``prompt`` as a task id); returns the first page."""
        task = parse_environment_row(row)
        if task.shopper is not None and not self.dialogue:
            raise AdapterError(f"row for task {task.task_id} asks for the {task.shopper!r} shopper: use "
                               "ShopDialogueToolEnvironment, which has the ask_user tool")
        if self._env is None:
            self._env = self.world.new_env(shoppers=shopper_registry())
        if task.shopper is None:
            reset = self._env.reset(task.task_id, persona=self.persona)
        else:  # a shopper implies multi_turn
            reset = self._env.reset(task.task_id, persona=self.persona, shopper=task.shopper)
        self._shell = EpisodeShell(self._env, reset, max_steps=self.max_steps)
        persona = reset.get("user_persona") or {}
        head = f"{PERSONA_HEADER}\n{persona_line(persona)}\n\n" if persona else ""
        opening = (reset.get("shopper_opening") or "") if task.shopper is not None else reset["task_instruction"]
        return head + first_user_message(opening, reset["observation"])

    def _act(self, action: str) -> str:
        if self._shell is None:
            raise EpisodeStateError("reset(**row) starts the episode before a tool call", code="no_active_episode")
        return self._shell.call(action)

    def get_reward(self) -> float:
        """The episode's r_strict (an unfinished episode is ended with ``action_limit`` first)."""
        if self._shell is None:
            return 0.0
        self._shell.finish()
        return self._shell.reward


class ShopDialogueToolEnvironment(ShopToolEnvironment):
    """The same, plus ``ask_user``: rows with a ``shopper`` column play dialogue episodes (single-turn rows
    still work, ``ask_user`` is then an invalid action judged by the environment)."""

    dialogue = True


_install_tools(ShopToolEnvironment)  # subclasses install theirs when they are defined (__init_subclass__)


def environment_rows(task_ids: Sequence[int], *, system_prompt: str = SYSTEM_PROMPT, shopper: str | None = None
                     ) -> dict[str, list[Any]]:
    """Dataset columns for the ``environment_factory`` path: a system prompt, an empty user turn, the task id
    (and the ``shopper`` column for dialogue rows, played by :class:`ShopDialogueToolEnvironment`)."""
    shopper = shopper_field(shopper, "shopper")
    return environment_columns(rows_of(task_ids, shopper=shopper), system_prompt, dialogue=shopper is not None)

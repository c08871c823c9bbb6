"""The trainer-agnostic rollout core: one episode as exact tokens, loss mask and rollout log-probs (docs/contract.md#runtime-turn-rules, #grpo).

The turn loop, validation, repair and termination are the agent runtime's: the prompt is the runtime's system
and first user message, each sampled text is parsed and checked by :func:`shopsimrl.agent.validation.interpret`
(the same parser every evaluation backend uses), protocol errors get the runtime's repair messages, a
cut-off generation ends the episode with ``terminate("generation_length")``, and running out of turns with
``terminate("action_limit")``. What this module adds is the token bookkeeping a trainer needs.

Every turn the conversation is re-rendered by the tokenizer's chat template with that turn's tools. When the
new prompt extends the current token sequence, only the new tokens (tool result, feedback, the next header)
are appended with loss mask 0; when it does not (the click enum changes every turn, reasoning is dropped from
history), a new *segment* starts instead of re-aligning, so that every sampled token is trained exactly once:
the multiset of tokens with loss mask 1 equals the multiset of generated tokens.

The turn's text (rendering, reading back) is in ``_turn_text.py``, the token ledger and trajectory in
``_ledger.py``; this module keeps the context, configuration and the turn loop, and re-exports their public names.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent.context import CONTEXT_POLICY as CONTEXT_POLICY
from ..agent.context import DEFAULT_CONTEXT_BUDGET as DEFAULT_CONTEXT_BUDGET
from ..agent.context import DEFAULT_CONTEXT_RESERVE as DEFAULT_CONTEXT_RESERVE
from ..agent.context import MEASURE_TOKENS, context_exceeded
from ..agent.episode import Episode, EpisodeRequest, EpisodeStats, run_episode
from ..agent.episode_env import EnvironmentFactory
from ..agent.prompt import SYSTEM_PROMPT, first_user_message, system_message
from ..agent.skills import Skill, render_skills
from ..agent.turn import REPAIR, TERMINATE, TurnDecision, decide_turn, observation_message
from ..agent.validation import ModelOutput
from ..contract import GENERATION_LENGTH, MULTI_TURN, SINGLE_TURN
from ..dialogue import SHOPPER_NAMES
from ..errors import RequestError, RolloutError, ShopSimError
from ..versions import PRIMARY_REWARD
from ._ledger import ABORTED as ABORTED
from ._ledger import COMPLETED as COMPLETED
from ._ledger import TRUNCATED as TRUNCATED
from ._ledger import Segment as Segment
from ._ledger import TokenLedger as TokenLedger
from ._ledger import Trajectory as Trajectory
from ._turn_text import FINISH_ABORT as FINISH_ABORT
from ._turn_text import FINISH_LENGTH as FINISH_LENGTH
from ._turn_text import FINISH_STOP as FINISH_STOP
from ._turn_text import ChatTokenizer as ChatTokenizer
from ._turn_text import first_or_render, parse_turn, render_delta, strip_stops
from .chat_template import TemplateInfo, episode_tools, prepare_tokenizer
from .render_pool import off_loop, resegment_tail
from .step_keys import state_key

ROLLOUT_SCHEMA = "shopsimrl-rollout-v1"
PROMPT_TAIL_TOKENS = 16  # decoded prompt tail handed to the response parser (the generation prompt's opener)


# The context policy (docs/training.md, "Context policy") is :mod:`shopsimrl.agent.context`'s, the same in the
# evaluation runtime and every adapter; here prompts are measured exactly (the template's token ids). An episode
# that reaches the budget ends with terminate("generation_length") and is scored (status ``truncated``), never
# dropped; the step records ``context_overflow`` (the prompt's length) and the metadata ``context_policy`` and
# ``context_ended``.


class TurnRequest(list[int]):
    """What ``generate`` is called with each turn: the prompt token ids (it *is* that list, so an engine that
    takes ``list[int]`` needs nothing else), plus the conversation so far and the page's own tools, for
    generators that act from them rather than from the ids (the scripted ones of ``shopsimrl.testing``).

    ``messages`` is the episode's live history (the same list every turn of one episode; do not modify it);
    ``tools`` are the page's own tools, with the click enum (the prompt may render the enum-free episode set).
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]]

    def __init__(self, prompt_ids: Sequence[int], messages: Sequence[Mapping[str, Any]] = (),
                 tools: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(prompt_ids)
        self.messages, self.tools = messages, tools


@dataclass(frozen=True)
class Generation:
    """What the inference engine sampled for one prompt: token ids, their log-probs, and why it stopped."""

    token_ids: Sequence[int]
    log_probs: Sequence[float]
    finish_reason: str = FINISH_STOP


#: The inference engine: a function of the turn's prompt (a ``list[int]``, a :class:`TurnRequest`).
GenerateFn = Callable[[TurnRequest], "Generation | Awaitable[Generation]"]


@dataclass(frozen=True)
class RolloutContext:
    """What every sibling of a GRPO group shares: the task, persona mode, prompt rules and skill subset."""

    task_id: int
    persona: bool | None = None  # None: the task's own mode (persona iff it has one)
    skills: tuple[Skill, ...] = ()
    prompt: str = SYSTEM_PROMPT
    interaction_mode: str = SINGLE_TURN
    shopper: str | None = None  # dialogue mode: the shopper's replies come back as tool messages (mask 0)
    seed: int = 0  # the shopper's episode seed (dialogue mode), shared by the siblings of a group

    def fingerprint(self) -> tuple[Any, ...]:
        return (self.task_id, self.persona, self.prompt, self.interaction_mode,
                tuple((s.skill_id, s.version, s.content_sha256) for s in self.skills), self.shopper, self.seed)

    def request(self, max_turns: int | None = None) -> EpisodeRequest:
        """The episode loop's request: the environment's own turn limit unless ``max_turns`` lowers it."""
        return EpisodeRequest(self.task_id, self.persona, self.interaction_mode, self.shopper,
                              self.seed if self.shopper else None, max_turns)

    @classmethod
    def for_task(cls, task_id: int, shopper: str | None = None, **fields: Any) -> RolloutContext:
        """The context of one task-source row: a shopper makes it a dialogue episode (``multi_turn``)."""
        return cls(task_id, interaction_mode=MULTI_TURN if shopper else SINGLE_TURN, shopper=shopper or None,
                   **fields)

    @property
    def turn_limit(self) -> int:
        """The episode's own turn limit (30 single-turn, 40 in dialogue mode: questions count)."""
        return self.request().turn_limit()


def parse_shopper(raw: Any) -> str | None:
    """A task source's ``shopper`` field (dataset column, ``extra_info``, sample metadata): absent, None or ""
    is a single-turn task; otherwise it must name a shopper (:data:`shopsimrl.dialogue.SHOPPER_NAMES`)."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or raw not in SHOPPER_NAMES:
        raise RequestError(f"unknown shopper {raw!r} in a task row; choose one of {list(SHOPPER_NAMES)} or none", code="dialogue_unavailable")
    return raw


@dataclass(frozen=True)
class RolloutConfig:
    max_steps: int | None = None  # None: the episode's own turn limit (30; 40 in dialogue mode)
    # the episode's context budget (the context policy below); None: no budget
    max_context_len: int | None = DEFAULT_CONTEXT_BUDGET
    context_reserve: int = DEFAULT_CONTEXT_RESERVE  # tokens of the budget a prompt must leave for the answer
    keep_reasoning: bool = False  # echo parsed reasoning into the assistant history ("wire message")
    stop_texts: tuple[str, ...] | None = None  # stripped from the decoded text end; None: the tokenizer's eos
    # "resegment": re-render every turn, fork a segment when the prompt is not an extension (slime, docs/contract.md#grpo);
    # "append": keep the exact sampled tokens and append only the rendered new messages (one sequence per
    # episode, for trainers that take one: verl, TRL). The tools block then stays as first rendered.
    mode: str = "resegment"
    # render search/click once per episode without the per-page enum (the enum is in the observation text);
    # False: render each page's own tools (the prefix then changes whenever the tools block does)
    episode_tools: bool = True
    training_template: str = "auto"  # "auto": swap a non-prefix-preserving template for TRL's training one
    # re-segment mode, prefix-preserving template: render and tokenize only the new messages each turn
    incremental: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("resegment", "append"):
            raise ShopSimError(f"unknown rollout mode {self.mode!r}: use 'resegment' or 'append'")


def _stop_texts(template: TemplateInfo, config: RolloutConfig) -> tuple[str, ...]:
    return config.stop_texts if config.stop_texts is not None else template.stops


def _check_generation(gen: Generation) -> None:
    if gen.finish_reason == FINISH_ABORT:
        raise RolloutError("the inference engine aborted the generation")
    if len(gen.log_probs) != len(gen.token_ids):
        raise RolloutError(f"{len(gen.log_probs)} log-probs for {len(gen.token_ids)} sampled tokens")
    if not gen.token_ids:
        raise RolloutError("the generation returned no token")
    if not all(math.isfinite(float(p)) for p in gen.log_probs):
        raise RolloutError("non-finite rollout log-prob")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _reward(final: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    detail = final.get("reward_detail")
    if not isinstance(detail, Mapping):
        raise RolloutError("the terminal response has no reward_detail")
    value = detail.get(PRIMARY_REWARD)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RolloutError(f"reward_detail.{PRIMARY_REWARD} is missing or not finite")
    reward = final.get("reward", value)
    if not isinstance(reward, (int, float)) or abs(float(reward) - float(value)) > 1e-9:
        raise RolloutError(f"reward {reward!r} differs from {PRIMARY_REWARD} {value!r}")
    return float(value), dict(detail)


class TokenTurns:
    """The rollout core's hooks: each turn renders the prompt, samples it, keeps the token ledger, and applies
    the runtime's turn rules to the parsed text."""

    def __init__(self, context: RolloutContext, tokenizer: ChatTokenizer, generate: GenerateFn,
                 config: RolloutConfig) -> None:
        self.context, self.tokenizer, self.generate, self.config = context, tokenizer, generate, config
        self.template = prepare_tokenizer(tokenizer, training_template=config.training_template)
        self.stops = _stop_texts(self.template, config)  # read once per tokenizer: not on the loop per episode
        self.ledger = TokenLedger()
        self.messages: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.fixed_tools = episode_tools(dialogue=context.shopper is not None) if config.episode_tools else None
        self.turn_start: int | None = None  # append mode: where the last sampled turn's history messages begin
        self.last_stop: str | None = None
        self.reward = 0.0
        self.detail: dict[str, Any] | None = None
        self.termination: str | None = None
        self.state: Mapping[str, Any] = {}  # the page the next turn acts on (its key goes into the step)
        self.canonical: list[int] | None = None  # re-segment mode: the last prompt's canonical ids
        self.context_ended = False

    def start(self, episode: Episode, reset: dict[str, Any]) -> None:
        self.state = reset["observation_state"]
        context = self.context
        persona = reset.get("user_persona") or {}
        self.messages.append({"role": "system",
                              "content": system_message(persona, render_skills(list(context.skills)), context.prompt)})
        visible = (reset.get("shopper_opening") or "") if context.shopper else reset["task_instruction"]
        self.messages.append({"role": "user", "content": first_user_message(visible, reset["observation"])})

    def _prompt(self, tools: list[dict[str, Any]]) -> list[int]:
        shown_tools = self.fixed_tools if self.fixed_tools is not None else tools
        template, messages = self.template, self.messages
        if self.config.mode == "append" and self.turn_start is not None and self.ledger.segments:
            return self.ledger.segments[-1].tokens + render_delta(
                self.tokenizer, messages, self.turn_start, shown_tools, self.last_stop,
                window=template.prefix_preserving, suffixes=template.suffixes if template.prefix_preserving else None)
        if (self.config.incremental and template.prefix_preserving and self.canonical is not None
                and self.turn_start is not None):
            tail = resegment_tail(self.tokenizer, messages, self.turn_start, shown_tools, template.suffixes)
            if tail is not None:
                self.canonical = self.canonical + tail
                return list(self.canonical)
        ids = first_or_render(self.tokenizer, template, messages, shown_tools, len(messages) == 2)
        self.canonical = list(ids)
        return ids

    def _read(self, ids: list[int], tail_ids: list[int], finish_reason: str, tools: list[dict[str, Any]]
              ) -> tuple[str, str, ModelOutput]:
        raw = self.tokenizer.decode(ids, skip_special_tokens=False)
        text = strip_stops(raw, self.stops)

        def prompt_tail() -> str:
            return str(self.tokenizer.decode(tail_ids, skip_special_tokens=False))

        return raw, text, parse_turn(self.tokenizer, raw, text, prompt_tail, finish_reason, tools)

    async def turn(self, episode: Episode, index: int, tools: list[dict[str, Any]]) -> TurnDecision:
        # rendering, tokenizing, decoding and parsing run in the render pool: the event loop stays free
        prompt_ids = await off_loop(self._prompt, tools)
        self.turn_start = len(self.messages)
        budget = self.config.max_context_len
        if context_exceeded(len(prompt_ids), budget, self.config.context_reserve):
            self.context_ended = True
            self.steps.append({"step_index": index, "action": None, "context_overflow": len(prompt_ids),
                               "state_key": state_key(self.state)})
            return TurnDecision(TERMINATE, termination=GENERATION_LENGTH)
        self.ledger.prompt(prompt_ids)
        gen = await episode.model(_maybe_await(self.generate(TurnRequest(prompt_ids, self.messages, tools))))
        _check_generation(gen)
        self.ledger.sample(gen.token_ids, gen.log_probs)
        raw, text, out = await off_loop(self._read, list(gen.token_ids), list(prompt_ids[-PROMPT_TAIL_TOKENS:]),
                                        gen.finish_reason, tools)
        self.last_stop = next((s for s in self.stops if raw.rstrip().endswith(s)), None)
        step: dict[str, Any] = {"step_index": index, "action": None, "sampled_tokens": len(gen.token_ids),
                                "finish_reason": gen.finish_reason, "raw_output": text,
                                "state_key": state_key(self.state)}
        self.steps.append(step)
        decision = decide_turn(out, tools, arguments="object")
        if decision.kind == REPAIR:
            step["protocol_error"] = out.protocol_error
            self.messages.extend(decision.messages)
        elif decision.kind == TERMINATE:
            step["policy_failure"] = out.policy_failure
        else:
            step["action"] = decision.action
            if self.config.keep_reasoning and out.reasoning:
                decision.messages[0]["reasoning_content"] = out.reasoning
            self.messages.extend(decision.messages)
        return decision

    def observe(self, episode: Episode, index: int, decision: TurnDecision, result: dict[str, Any]) -> None:
        feedback = result.get("action_feedback") or {}
        self.steps[-1]["valid"] = feedback.get("valid")
        self.messages.append(observation_message(decision, result["observation"]))
        self.state = result["observation_state"]

    async def finish(self, episode: Episode, final: dict[str, Any]) -> None:
        episode.stage = "scoring"
        self.reward, self.detail = _reward(final)
        self.termination = final.get("termination_reason")
        if not self.ledger.trainable():
            raise RolloutError("the episode produced no trainable token")


async def run_rollout(
    context: RolloutContext, tokenizer: ChatTokenizer, generate: GenerateFn, environment: EnvironmentFactory, *,
    config: RolloutConfig | None = None, metadata: Mapping[str, Any] | None = None,
    timer: EpisodeStats | None = None,
) -> Trajectory:
    """Run one episode; never raises for an episode failure (it comes back ``aborted`` with an error)."""
    cfg = config or RolloutConfig()
    hooks = TokenTurns(context, tokenizer, generate, cfg)
    episode = await run_episode(environment, context.request(cfg.max_steps), hooks, stats=timer)
    if episode.completed:
        status = TRUNCATED if hooks.termination == GENERATION_LENGTH else COMPLETED
        reward, detail = hooks.reward, hooks.detail
    else:
        status, reward, detail = ABORTED, 0.0, None
    ledger = hooks.ledger
    meta = {"schema_version": ROLLOUT_SCHEMA, "termination_reason": hooks.termination,
            "steps": len(hooks.steps), "segments": len(ledger.trainable()),
            "chat_template": hooks.template.note or "as shipped", "context_budget": cfg.max_context_len,
            "context_policy": CONTEXT_POLICY, "context_measure": MEASURE_TOKENS, "context_ended": hooks.context_ended,
            **(metadata or {})}
    return Trajectory(task_id=context.task_id, status=status, segments=ledger.trainable(), reward=reward,
                      reward_detail=detail, generated_tokens=ledger.generated, messages=hooks.messages,
                      steps=hooks.steps, metadata=meta, error=episode.error)

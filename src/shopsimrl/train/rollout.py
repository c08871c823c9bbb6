"""The trainer-agnostic rollout core: one episode as exact tokens, loss mask and rollout log-probs (§3, §7).

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
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..agent.prompt import SYSTEM_PROMPT, first_user_message, system_message
from ..agent.runtime import AgentRuntime, AsyncEnv, EnvironmentFactory
from ..agent.skills import Skill, render_skills
from ..agent.validation import ModelOutput, feedback_text, interpret, protocol_feedback
from ..env.tools import tools_for_state
from ..errors import ShopSimError
from ..versions import EPISODE_LIMITS, PRIMARY_REWARD

ROLLOUT_SCHEMA = "shopsimrl-rollout-v1"
COMPLETED, TRUNCATED, ABORTED = "completed", "truncated", "aborted"
FINISH_STOP, FINISH_LENGTH, FINISH_ABORT = "stop", "length", "abort"


class RolloutError(ShopSimError):
    """A technical failure of one rollout (bad generation output, env failure): the episode is unscored."""


@dataclass(frozen=True)
class Generation:
    """What the inference engine sampled for one prompt: token ids, their log-probs, and why it stopped."""

    token_ids: Sequence[int]
    log_probs: Sequence[float]
    finish_reason: str = FINISH_STOP


GenerateFn = Callable[[list[int]], "Generation | Awaitable[Generation]"]


class ChatTokenizer(Protocol):
    """The slice of a Hugging Face tokenizer that the rollout core uses."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...


@dataclass(frozen=True)
class RolloutContext:
    """What every sibling of a GRPO group shares: the task, persona mode, prompt rules and skill subset."""

    task_id: int
    persona: bool | None = None  # None: the task's own mode (persona iff it has one)
    skills: tuple[Skill, ...] = ()
    prompt: str = SYSTEM_PROMPT
    interaction_mode: str = "single_turn"

    def fingerprint(self) -> tuple[Any, ...]:
        return (self.task_id, self.persona, self.prompt, self.interaction_mode,
                tuple((s.skill_id, s.version, s.content_sha256) for s in self.skills))


@dataclass(frozen=True)
class RolloutConfig:
    max_steps: int = EPISODE_LIMITS["single_turn"]
    max_context_len: int | None = None  # a prompt longer than this ends the episode as generation_length
    keep_reasoning: bool = False  # echo parsed reasoning into the assistant history ("wire message")
    stop_texts: tuple[str, ...] | None = None  # stripped from the decoded text end; None: the tokenizer's eos
    # "resegment": re-render every turn, fork a segment when the prompt is not an extension (slime, §7);
    # "append": keep the exact sampled tokens and append only the rendered new messages (one sequence per
    # episode, for trainers that take one: verl, TRL). The tools block then stays as first rendered.
    mode: str = "resegment"

    def __post_init__(self) -> None:
        if self.mode not in ("resegment", "append"):
            raise ShopSimError(f"unknown rollout mode {self.mode!r}: use 'resegment' or 'append'")


@dataclass
class Segment:
    """One token-contiguous training sequence: a prompt, then alternating sampled and context tokens.

    ``loss_mask`` and ``log_probs`` are aligned with ``tokens``; the first ``prompt_length`` tokens are the
    prompt (mask 0). ``response_*`` are the slices after the prompt, the form slime and verl want.
    """

    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    prompt_length: int = 0
    turns: int = 0

    @property
    def response_tokens(self) -> list[int]:
        return self.tokens[self.prompt_length:]

    @property
    def response_mask(self) -> list[int]:
        return self.loss_mask[self.prompt_length:]

    @property
    def response_log_probs(self) -> list[float]:
        return self.log_probs[self.prompt_length:]

    @property
    def trained_tokens(self) -> list[int]:
        return [t for t, m in zip(self.tokens, self.loss_mask, strict=True) if m]


@dataclass
class Trajectory:
    """One episode for a trainer: segments, the scalar reward (``r_strict``), its detail and a status."""

    task_id: int
    status: str
    segments: list[Segment]
    reward: float
    reward_detail: dict[str, Any] | None
    generated_tokens: list[int]
    messages: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    metadata: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    @property
    def scored(self) -> bool:
        return self.status != ABORTED

    @property
    def success(self) -> float:
        return float((self.reward_detail or {}).get("r_success", 0.0))

    @property
    def trained_tokens(self) -> list[int]:
        return [t for segment in self.segments for t in segment.trained_tokens]

    # Flat views for the common single-segment case (and for trainers that take one sequence per episode).
    @property
    def token_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.tokens]

    @property
    def loss_mask(self) -> list[int]:
        return [m for s in self.segments for m in s.loss_mask]

    @property
    def log_probs(self) -> list[float]:
        return [p for s in self.segments for p in s.log_probs]


class TokenLedger:
    """Appends prompts and samples to segments; a prompt that is not an extension starts a new segment."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.generated: list[int] = []

    def prompt(self, prompt_ids: Sequence[int]) -> None:
        prompt_ids = list(prompt_ids)
        current = self.segments[-1] if self.segments else None
        if current is not None:
            n = len(current.tokens)
            if len(prompt_ids) >= n and prompt_ids[:n] == current.tokens:
                extra = prompt_ids[n:]
                current.tokens.extend(extra)
                current.loss_mask.extend([0] * len(extra))
                current.log_probs.extend([0.0] * len(extra))
                return
        self.segments.append(Segment(tokens=prompt_ids, loss_mask=[0] * len(prompt_ids),
                                     log_probs=[0.0] * len(prompt_ids), prompt_length=len(prompt_ids)))

    def sample(self, token_ids: Sequence[int], log_probs: Sequence[float]) -> None:
        segment = self.segments[-1]
        segment.tokens.extend(token_ids)
        segment.loss_mask.extend([1] * len(token_ids))
        segment.log_probs.extend(float(p) for p in log_probs)
        segment.turns += 1
        self.generated.extend(token_ids)

    def trainable(self) -> list[Segment]:
        """Segments with at least one sampled token (a trailing prompt-only segment carries nothing)."""
        return [s for s in self.segments if any(s.loss_mask)]


def render_prompt(tokenizer: ChatTokenizer, messages: Sequence[Mapping[str, Any]],
                  tools: Sequence[Mapping[str, Any]]) -> list[int]:
    """Prompt ids from the chat template (accepts a list of ids or a ``BatchEncoding``-like mapping)."""
    out = tokenizer.apply_chat_template(list(messages), tools=list(tools), add_generation_prompt=True,
                                        tokenize=True)
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"] if isinstance(out, Mapping) else out.input_ids
    ids = list(out)
    if ids and isinstance(ids[0], (list, tuple)):  # a batch of one
        ids = list(ids[0])
    return [int(t) for t in ids]


def render_delta(tokenizer: Any, messages: Sequence[Mapping[str, Any]], base: int,
                 tools: Sequence[Mapping[str, Any]]) -> list[int]:
    """Tokens of what ``messages[base:]`` add to the rendered conversation, plus the generation header."""
    full = tokenizer.apply_chat_template(list(messages), tools=list(tools), add_generation_prompt=True,
                                         tokenize=False)
    head = tokenizer.apply_chat_template(list(messages[:base]), tools=list(tools), add_generation_prompt=False,
                                         tokenize=False)
    if not full.startswith(head):
        raise RolloutError("the chat template does not render a conversation as an extension of its prefix")
    return [int(t) for t in tokenizer.encode(full[len(head):], add_special_tokens=False)]


def _stop_texts(tokenizer: Any, config: RolloutConfig) -> tuple[str, ...]:
    if config.stop_texts is not None:
        return config.stop_texts
    eos = getattr(tokenizer, "eos_token", None)
    return (eos,) if isinstance(eos, str) and eos else ()


def _strip_stops(text: str, stops: Sequence[str]) -> str:
    changed = True
    while changed:
        changed = False
        stripped = text.rstrip()
        for stop in stops:
            if stop and stripped.endswith(stop):
                text, changed = stripped[: -len(stop)], True
    return text


def parse_sampled(text: str, finish_reason: str, tools: Sequence[Mapping[str, Any]]) -> ModelOutput:
    """Sampled text → the runtime's validated :class:`ModelOutput` (``<think>`` and ``<tool_call>`` blocks)."""
    reason = FINISH_LENGTH if finish_reason == FINISH_LENGTH else "stop"
    payload = {"choices": [{"index": 0, "finish_reason": reason,
                            "message": {"role": "assistant", "content": text}}]}
    return interpret(payload, tools)


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


@dataclass
class RolloutTimer:
    """Time split over rollouts (for the overhead benchmark; never part of a trajectory)."""

    total_s: float = 0.0
    generate_s: float = 0.0
    env_s: float = 0.0
    turns: int = 0
    episodes: int = 0

    @property
    def core_s(self) -> float:
        return self.total_s - self.generate_s - self.env_s


async def run_rollout(
    context: RolloutContext, tokenizer: ChatTokenizer, generate: GenerateFn, environment: EnvironmentFactory, *,
    config: RolloutConfig | None = None, metadata: Mapping[str, Any] | None = None,
    timer: RolloutTimer | None = None,
) -> Trajectory:
    """Run one episode; never raises for an episode failure (it comes back ``aborted`` with an error)."""
    cfg = config or RolloutConfig()
    clock = time.perf_counter
    t0 = clock()
    gen_s = env_s = 0.0
    stops = _stop_texts(tokenizer, cfg)
    ledger = TokenLedger()
    messages: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    status, reward, detail, error = ABORTED, 0.0, None, None
    termination: str | None = None
    stage = "reset"
    env: AsyncEnv | None = None
    try:
        env = environment.new()
        t = clock()
        reset = await env.reset(context.task_id, context.persona, context.interaction_mode)
        env_s += clock() - t
        persona = reset.get("user_persona") or {}
        messages.append({"role": "system",
                         "content": system_message(persona, render_skills(list(context.skills)), context.prompt)})
        messages.append({"role": "user",
                         "content": first_user_message(reset["task_instruction"], reset["observation"])})
        state = reset["observation_state"]
        final: Mapping[str, Any] | None = None
        truncated = False
        base: int | None = None  # append mode: messages already covered by the sequence
        for step_index in range(1, cfg.max_steps + 1):
            stage = f"model_step_{step_index}"
            tools = tools_for_state(state)
            if not tools:
                raise RolloutError("the page offers no tool but the episode is not done")
            if cfg.mode == "append" and base is not None and ledger.segments:
                prompt_ids = ledger.segments[-1].tokens + render_delta(tokenizer, messages, base, tools)
            else:
                prompt_ids = render_prompt(tokenizer, messages, tools)
            turn_start = len(messages)
            if cfg.max_context_len is not None and len(prompt_ids) >= cfg.max_context_len:
                steps.append({"step_index": step_index, "action": None, "context_overflow": len(prompt_ids)})
                truncated = True
            else:
                ledger.prompt(prompt_ids)
                t = clock()
                gen = await _maybe_await(generate(prompt_ids))
                gen_s += clock() - t
                _check_generation(gen)
                ledger.sample(gen.token_ids, gen.log_probs)
                text = _strip_stops(tokenizer.decode(list(gen.token_ids), skip_special_tokens=False), stops)
                out = parse_sampled(text, gen.finish_reason, tools)
                step: dict[str, Any] = {"step_index": step_index, "action": None,
                                        "sampled_tokens": len(gen.token_ids), "finish_reason": gen.finish_reason,
                                        "raw_output": text}
                steps.append(step)
                if out.policy_failure is not None:
                    step["policy_failure"] = out.policy_failure
                    truncated = True
                elif out.protocol_error is not None:
                    feedback = protocol_feedback(out.protocol_error, tools)
                    step["protocol_error"] = out.protocol_error
                    AgentRuntime._append_repair(messages, out, feedback_text(feedback))
                    base = turn_start + (1 if messages[turn_start]["role"] == "assistant" else 0)
                    continue
            if truncated:
                stage = f"policy_termination_step_{step_index}"
                t = clock()
                final = await env.terminate("generation_length")
                env_s += clock() - t
                break
            action = out.canonical_action()
            step["action"] = action
            call = out.call.wire()
            assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            if cfg.keep_reasoning and out.reasoning:
                assistant["reasoning_content"] = out.reasoning
            messages.append(assistant)
            base = len(messages)
            stage = f"environment_step_{step_index}"
            t = clock()
            result = await env.step(action)
            env_s += clock() - t
            feedback_block = result.get("action_feedback") or {}
            step["valid"] = feedback_block.get("valid")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result["observation"]})
            if result.get("done"):
                final = result
                break
            state = result["observation_state"]
        if final is None:
            stage = "action_limit_termination"
            t = clock()
            final = await env.terminate("action_limit")
            env_s += clock() - t
        stage = "scoring"
        reward, detail = _reward(final)
        termination = final.get("termination_reason")
        if not ledger.trainable():
            raise RolloutError("the episode produced no trainable token")
        status = TRUNCATED if termination == "generation_length" else COMPLETED
    except Exception as exc:
        status, reward, detail = ABORTED, 0.0, None
        error = {"stage": stage, "type": type(exc).__name__, "message": str(exc)}
    finally:
        if env is not None:
            try:
                await env.close()
            except Exception as exc:
                if error is None:
                    error = {"stage": "cleanup", "type": type(exc).__name__, "message": str(exc)}
    meta = {"schema_version": ROLLOUT_SCHEMA, "termination_reason": termination, "steps": len(steps),
            "segments": len(ledger.trainable()), **(metadata or {})}
    if timer is not None:
        timer.total_s += clock() - t0
        timer.generate_s += gen_s
        timer.env_s += env_s
        timer.turns += len(steps)
        timer.episodes += 1
    return Trajectory(task_id=context.task_id, status=status, segments=ledger.trainable(), reward=reward,
                      reward_detail=detail, generated_tokens=ledger.generated, messages=messages, steps=steps,
                      metadata=meta, error=error)

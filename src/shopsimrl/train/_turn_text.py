"""The text of one rollout turn: the prompt ids the chat template renders (the whole conversation, a bounded
window of it, or append mode's delta after a sampled turn) and the sampled text read back (stop texts stripped,
parsed by the validator or the parser of the template's tool-call format). Private to the rollout core (``rollout.py``),
which keeps the token ledger and the turn loop; split out so that each stays readable."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..agent.validation import ModelOutput, interpret
from ..errors import DataError, RolloutError
from .chat_template import (
    KNOWN_STOPS,
    encode,
    render_text,
    template_messages,
    turn_suffix,
)
from .render_pool import WINDOW_HEAD
from .tool_formats import format_for, payload, reopen_think
from .tool_formats import strip_stops as strip_stops

FINISH_STOP, FINISH_LENGTH, FINISH_ABORT = "stop", "length", "abort"  # a Generation's finish_reason


class ChatTokenizer(Protocol):
    """The slice of a Hugging Face tokenizer that the rollout core uses."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...


def render_prompt(tokenizer: ChatTokenizer, messages: Sequence[Mapping[str, Any]],
                  tools: Sequence[Mapping[str, Any]]) -> list[int]:
    """Prompt ids from the chat template (accepts a list of ids or a ``BatchEncoding``-like mapping)."""
    out = tokenizer.apply_chat_template(template_messages(messages), tools=list(tools), add_generation_prompt=True,
                                        tokenize=True)
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"] if isinstance(out, Mapping) else out.input_ids
    ids = list(out)
    if ids and isinstance(ids[0], (list, tuple)):  # a batch of one
        ids = list(ids[0])
    return [int(t) for t in ids]


def _window(messages: list[Mapping[str, Any]], turn_start: int) -> tuple[list[Mapping[str, Any]], int]:
    """The messages of the last turn on, behind a short system and user message.

    For a prefix-preserving template (checked by :func:`~shopsimrl.train.chat_template.prepare_tokenizer`)
    what new messages add does not depend on the earlier context, so each turn renders a bounded window
    instead of the whole episode (the template-matrix test compares the result with the full render).
    """
    if turn_start < len(WINDOW_HEAD):
        return messages, turn_start
    return [*WINDOW_HEAD, *messages[turn_start:]], len(WINDOW_HEAD)


FIRST_PROMPT_CACHE = 512


def first_or_render(tokenizer: Any, template: Any, messages: Sequence[Mapping[str, Any]],
                     tools: Sequence[Mapping[str, Any]], first: bool) -> list[int]:
    """The first prompt is the same for every sibling of a group: rendered and tokenized once (HF templates)."""
    if not (first and template.prefix_preserving):
        return render_prompt(tokenizer, messages, tools)
    key = (messages[0].get("content"), messages[1].get("content"), len(tools))
    cached = template.first_prompts.get(key)
    if cached is None:
        if len(template.first_prompts) >= FIRST_PROMPT_CACHE:
            template.first_prompts.clear()
        cached = template.first_prompts[key] = render_prompt(tokenizer, messages, tools)
    return list(cached)


def render_delta(tokenizer: Any, messages: Sequence[Mapping[str, Any]], turn_start: int,
                 tools: Sequence[Mapping[str, Any]], stop: str | None = None, *, window: bool = False,
                 suffixes: dict[Any, Any] | None = None) -> list[int]:
    """Tokens that continue an append-mode sequence after the sampled turn that began at ``turn_start``.

    The end of the sampled turn is the template's own: the text it renders after the sampled stop token
    (``"\n"`` after ``<|im_end|>``). When the turn left no assistant message in the history (an empty repair),
    the boundary is read from a placeholder assistant turn rendered at the same place. A stop token that the
    template renders as the start of the next message (GLM's ``<|observation|>``) is not repeated.
    ``window=True`` (prefix-preserving templates) renders only from the previous assistant turn on.
    """
    messages = list(messages)
    if window:
        messages, turn_start = _window(messages, turn_start)
    echoed = turn_start < len(messages) and messages[turn_start].get("role") == "assistant"
    probe = messages if echoed else [*messages[:turn_start], {"role": "assistant", "content": "x"}]
    head = render_text(tokenizer, messages[: turn_start + 1] if echoed else messages[:turn_start], tools,
                       add_generation_prompt=False)
    key = (stop, echoed and bool(messages[turn_start].get("tool_calls")))
    if suffixes is not None and key in suffixes:
        found = suffixes[key]
    else:
        found = turn_suffix(tokenizer, probe, turn_start, tools, stop)
        if suffixes is not None and echoed:  # the text after a stop token is the template's constant
            suffixes[key] = found[1:] if found is not None else None
    full = render_text(tokenizer, messages, tools, add_generation_prompt=True)  # last: the prompt generate answers
    if not full.startswith(head):
        # a template that ends the *last* message differently from the same message in history (gpt-oss: the
        # sampled final-channel <|return|> becomes <|end|>): the sampled stop stands in for the history's one
        ends = [head.rindex(s) for s in KNOWN_STOPS if s in head]
        cut = head[: max(ends)] if ends else head
        if ends and full.startswith(cut):
            rest = full[len(cut):]
            marker = next((s for s in KNOWN_STOPS if rest.startswith(s)), "")
            return encode(tokenizer, rest[len(marker):])
        raise RolloutError("the chat template does not render the conversation as an extension of its prefix "
                                "(it rewrites an earlier turn); use its training variant or mode='resegment'", code="chat_template")
    suffix = found[-1] if found is not None else ""
    rest = full[len(head):]
    if not suffix and stop and rest.startswith(stop):
        rest = rest[len(stop):]
    return encode(tokenizer, suffix + rest)


def parse_turn(tokenizer: Any, raw_text: str, text: str, prompt_tail: Callable[[], str], finish_reason: str,
               tools: Sequence[Mapping[str, Any]]) -> ModelOutput:
    """The validator's text parser (``<tool_call>`` JSON or XML, after a think block the prompt opened); when it
    rejects the output, the parser of the template's own tool-call format (``tool_formats``: Llama JSON,
    gpt-oss channels, GLM XML, Gemma 4, LFM2). ``raw_text`` (with its stop texts) is kept for the callers'
    signature; the formats read the stripped ``text``."""
    close = text.find("</think>")
    if close >= 0 and "<think>" not in text[:close]:
        text = reopen_think(text, prompt_tail())
    out = parse_sampled(text, finish_reason, tools)
    template = getattr(tokenizer, "chat_template", None)
    found = format_for(template) if not out.accepted and isinstance(template, str) else None
    if found is None:
        return out
    name, parser = found
    try:
        parsed = interpret(payload(parser(text, tools), finish_reason), tools)
    except DataError as exc:
        if exc.code != "response_format":
            raise
        if out.protocol_error is not None:
            out.protocol_error = {"code": "invalid_tool_call", "message": f"{name} tool call: {exc}"}
        return out
    if parsed.accepted or "<tool_call>" not in text:  # its content is free of the format's markup
        return parsed
    return out


def parse_sampled(text: str, finish_reason: str, tools: Sequence[Mapping[str, Any]]) -> ModelOutput:
    """Sampled text → the runtime's validated :class:`ModelOutput` (``<think>`` and ``<tool_call>`` blocks)."""
    reason = FINISH_LENGTH if finish_reason == FINISH_LENGTH else "stop"
    payload = {"choices": [{"index": 0, "finish_reason": reason,
                            "message": {"role": "assistant", "content": text}}]}
    return interpret(payload, tools)

"""Chat-template handling for the rollout core: training-template policy, turn boundaries, response parsing.

Policy for templates that rewrite earlier turns (documented in docs/training.md, tested in
tests/test_train_templates.py):

- ``training_template="auto"`` (default): when the tokenizer's template is *not* prefix-preserving (Qwen3's
  original drops/adds an empty ``<think>`` block depending on the turn's position), it is swapped for its
  patched training template, exactly as TRL's own GRPO tool loop does
  (``trl.chat_template_utils.get_training_chat_template``). Without TRL (verl's environment has none) the
  project's own copies of the training templates it needs are used (``training_templates/``: Qwen3, Qwen3.5
  think/nothink, Qwen3.6, gpt-oss; each file's source is named in its ``manifest.json``), matched by the
  original template's SHA-256. Prefix-preserving templates are left alone. ``"off"`` never swaps.
- The rollout core still checks every turn: a re-rendered prompt that is not an extension of the sequence
  starts a new segment (re-segment mode) or fails the episode with a template error (append mode).

The end-of-turn boundary in append mode is read from the template's own render of the sampled turn: the
text that follows the sampled stop token (``"\\n"`` after Qwen's ``<|im_end|>``, nothing after Llama's
``<|eot_id|>``), and a stop token that the template renders as the *start* of the next message (GLM's
``<|observation|>``) is not rendered twice.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..env.tools import EPISODE_VALUE_DESCRIPTION as EPISODE_VALUE_DESCRIPTION
from ..env.tools import episode_tools as episode_tools
from .tool_formats import format_for

# Stop tokens of the template families the project is tested with (model-emitted end-of-turn markers).
KNOWN_STOPS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|call|>", "<|return|>", "<|end|>", "<|observation|>",
               "<|user|>", "<|endoftext|>")


@dataclass
class TemplateInfo:
    """What :func:`prepare_tokenizer` did to a tokenizer (goes into rollout metadata)."""

    swapped_to_training: bool = False
    response_format: str = ""  # the project's parser for the template's tool calls (tool_formats), if any
    prefix_preserving: bool = False  # after any swap: append mode may render bounded windows
    suffixes: dict[Any, Any] = field(default_factory=dict)  # end-of-turn text per (stop, kind), read once
    first_prompts: dict[Any, list[int]] = field(default_factory=dict)  # a group's shared first prompt
    stops: tuple[str, ...] = ()  # stop_texts(tokenizer), read once: get_added_vocab costs ms per call
    note: str = ""


def prepare_tokenizer(tokenizer: Any, *, training_template: str = "auto") -> TemplateInfo:
    """Apply the training-template policy once per tokenizer and name the template's tool-call format."""
    cached = getattr(tokenizer, "_shopsimrl_template_info", None)
    if isinstance(cached, TemplateInfo):
        return cached
    info = TemplateInfo()
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str):
        try:
            from trl.chat_template_utils import get_training_chat_template
        except ImportError:
            info.note = "TRL not installed: template used as shipped"
            if training_template == "auto" and not prefix_preserving(tokenizer):
                shipped = shipped_training_template(template)
                if shipped is not None:
                    tokenizer.chat_template = shipped
                    info.swapped_to_training = True
                    info.note = "not prefix-preserving: swapped for the shipped training template (TRL's)"
                else:
                    info.note = "TRL not installed and no shipped training variant: segments may fork"
        else:
            if training_template == "auto" and not prefix_preserving(tokenizer):
                try:
                    patched = get_training_chat_template(tokenizer)
                except Exception:
                    patched = None
                patched = patched if patched is not None else shipped_training_template(template)
                if patched is not None:
                    tokenizer.chat_template = patched
                    info.swapped_to_training = True
                    info.note = "not prefix-preserving: swapped for TRL's training template"
                else:
                    info.note = "not prefix-preserving and TRL has no training variant: segments may fork"
    if isinstance(getattr(tokenizer, "chat_template", None), str):
        info.prefix_preserving = prefix_preserving(tokenizer)
        found = format_for(tokenizer.chat_template)
        info.response_format = found[0] if found else ""
    info.stops = stop_texts(tokenizer)
    with contextlib.suppress(AttributeError):
        tokenizer._shopsimrl_template_info = info
    return info


TRAINING_TEMPLATES = "training_templates"


def shipped_training_template(template: str) -> str | None:
    """The project's copy of the training variant of ``template`` (matched by SHA-256), if it ships one."""
    import hashlib
    from importlib import resources

    folder = resources.files(__package__).joinpath(TRAINING_TEMPLATES)
    manifest = json.loads(folder.joinpath("manifest.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()
    for name, entry in manifest.items():
        if entry["replaces_sha256"] == digest:
            return folder.joinpath(name).read_text(encoding="utf-8")
    return None


_PROBE_CALL = {"id": "call-0", "type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}
PROBE_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
    {"role": "assistant", "content": None, "tool_calls": [_PROBE_CALL]},
    {"role": "tool", "tool_call_id": "call-0", "content": "o"},
    {"role": "assistant", "content": "t"},  # a repair turn: visible text, then feedback as a user message
    {"role": "user", "content": "f"},
    {"role": "assistant", "content": None, "tool_calls": [_PROBE_CALL]},
]


def prefix_preserving(tokenizer: Any) -> bool:
    """Whether every prefix of an episode-shaped conversation renders as a prefix of the next one.

    Stricter than TRL's own check (one tool message after one call): it includes the repair turn's user
    message, which moves Qwen3/3.5's "last query" and so rewrites earlier assistant turns.
    """
    tools = episode_tools()
    try:
        renders = [render_text(tokenizer, PROBE_CONVERSATION[:n], tools, add_generation_prompt=False)
                   for n in range(3, len(PROBE_CONVERSATION) + 1)]
    except Exception:
        return False
    return all(b.startswith(a) for a, b in itertools.pairwise(renders))


def stop_texts(tokenizer: Any) -> tuple[str, ...]:
    """The tokenizer's eos and every known end-of-turn marker that is one of its (added) tokens."""
    out: list[str] = []
    eos = getattr(tokenizer, "eos_token", None)
    if isinstance(eos, str) and eos:
        out.append(eos)
    vocab = getattr(tokenizer, "get_added_vocab", None)
    added = set(vocab()) if callable(vocab) else set()
    out.extend(s for s in KNOWN_STOPS if s in added and s not in out)
    return tuple(out)


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the template sees them: keys whose value is None left out (a tool-call turn's ``content``).

    transformers >= 5.11 drops such keys itself before rendering; 5.10 (verl 0.9.1's pin) passes them on, and a
    template that tests ``"x" in message.content`` (gpt-oss's) then fails with a TypeError. Dropping them here
    renders the same text under both."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def render_text(tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
                add_generation_prompt: bool) -> str:
    return str(tokenizer.apply_chat_template(template_messages(messages), tools=list(tools) or None,
                                             add_generation_prompt=add_generation_prompt, tokenize=False))


def encode(tokenizer: Any, text: str) -> list[int]:
    return [int(t) for t in tokenizer.encode(text, add_special_tokens=False)]


def turn_suffix(tokenizer: Any, messages: Sequence[Mapping[str, Any]], assistant_index: int,
                tools: Sequence[Mapping[str, Any]], stop: str | None) -> tuple[str, str] | None:
    """(the template's render of the assistant turn, the text it puts after the sampled stop token)."""
    asked = render_text(tokenizer, messages[:assistant_index], tools, add_generation_prompt=True)
    head = render_text(tokenizer, messages[: assistant_index + 1], tools, add_generation_prompt=False)
    if not head.startswith(asked):
        return None
    turn = head[len(asked):]
    if stop and stop in turn:
        return turn, turn[turn.rindex(stop) + len(stop):]
    return turn, ""

"""A small causal LM made here from scratch (no download) and a KV-cached sampler for it, for the CPU recipe.

* :func:`build_tokenizer`: a byte-level BPE trained on the public product fields, the train split's requests, the
  system prompt and the tool schemas
  (:func:`~shopsimrl.train.bpe_tokenizer.build_bpe_tokenizer`), with the Qwen2.5 chat template TRL bundles, so the
  rollout core, TRL's trainers and the served checkpoint all render exactly what a GPU user's Qwen model would.
* :func:`build_model`: a Qwen2-architecture ``transformers`` model with random init (:data:`PRESETS`).
* :class:`CachedGenerate`: ``generate(prompt_ids) -> Generation`` for ``make_rollout_func(generate_factory=...)``
  and the checkpoint server. Episodes grow by appending, so the key/value cache of the longest common prefix
  with an earlier call is reused and only the new tokens (the observation) are encoded (``model.generate``
  re-encodes the whole episode every turn: 3x the tokens; measured 1.1x the time on 2 CPU cores, where the
  incremental attention is slower per token, benchmarks/bench_cpu_context.py).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .chat_template import episode_tools
from .rollout import FINISH_LENGTH, FINISH_STOP, Generation

TEMPLATE_FILE = "qwen2_5.jinja"  # TRL's bundled Qwen2.5 template (tool calls as <tool_call> JSON)
TRAINING_TEMPLATE_FILE = "qwen2_5_training.jinja"  # the same render plus {% generation %} markers (SFT loss mask)


@dataclass(frozen=True)
class ModelPreset:
    """Size of the model and tokenizer (Qwen2 architecture)."""

    vocab_size: int = 4000
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 384
    max_positions: int = 16384


PRESETS = {
    "tiny": ModelPreset(vocab_size=2000, hidden_size=64, layers=2, heads=2, kv_heads=1, intermediate_size=128),
    "cpu": ModelPreset(),
    "gpu": ModelPreset(vocab_size=8000, hidden_size=512, layers=8, heads=8, kv_heads=4, intermediate_size=1536),
}


def chat_template(name: str = TEMPLATE_FILE) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / name).read_text(encoding="utf-8")


#: The product fields the tokenizer may read: what a listing and a product page show (title, attributes, the
#: customization options, the bullets). Never ``instructions`` or ``user_persona``: the goals of every split.
PUBLIC_PRODUCT_FIELDS = ("title", "attribute", "customization_options", "small_description")


def public_product_text(product: Mapping[str, Any]) -> str:
    """One product record reduced to its public, non-goal fields (:data:`PUBLIC_PRODUCT_FIELDS`), as JSON."""
    return json.dumps({k: product[k] for k in PUBLIC_PRODUCT_FIELDS if k in product}, ensure_ascii=False)


def corpus(data: str | Path, *, products: int = 6000, train_requests: bool = True) -> list[str]:
    """Tokenizer training text: the rules, the tool schemas, the public fields of the first ``products`` catalog
    records and (``train_requests``) the requests of the persona *train* split, nothing of val or test (a
    held-out claim needs the tokenizer never to have seen a held-out request, even as BPE merges)."""
    from ..agent.prompt import SYSTEM_PROMPT
    from ..catalog.store import Catalog

    items = json.loads(gzip.decompress((Path(data) / "products.json.gz").read_bytes()))[:products]
    requests: list[str] = []
    if train_requests:
        catalog = Catalog.from_data_dir(data)
        try:
            requests = [str(catalog.goal(task)["instruction_text"]) for task in catalog.split("train")]
        finally:
            catalog.close()
    return [SYSTEM_PROMPT, json.dumps(episode_tools(), ensure_ascii=False),
            *(public_product_text(p) for p in items), *requests]


def build_tokenizer(texts: Iterable[str], preset: ModelPreset) -> Any:
    from .bpe_tokenizer import build_bpe_tokenizer

    return build_bpe_tokenizer(texts, vocab_size=preset.vocab_size, chat_template=chat_template())


def build_model(tokenizer: Any, preset: ModelPreset, *, seed: int) -> Any:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=preset.hidden_size, intermediate_size=preset.intermediate_size,
        num_hidden_layers=preset.layers, num_attention_heads=preset.heads, num_key_value_heads=preset.kv_heads,
        max_position_embeddings=preset.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    config.shopsimrl_preset = asdict(preset)
    return Qwen2ForCausalLM(config)


def parameter_count(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class CachedGenerate:
    """Samples one turn; reuses the key/value cache of the longest common prefix among the last ``slots`` calls.

    ``temperature == 0`` is greedy. Log-probs are those of the temperature-scaled distribution (what the
    trainer's importance ratio compares against). ``seed`` per call (the eval runtime's per-turn seed) makes a
    turn reproducible whatever the interleaving; without it one generator is drawn from in call order.

    ``tool_choice="required"`` samples one call of the turn's tools (a :class:`~.rollout.TurnRequest`'s
    ``tools``, or ``tools=``) under :mod:`~.tool_grammar`'s constraint, as vLLM does for that tool choice;
    log-probs stay the unconstrained ones. A turn without tools, or whose tools cannot be constrained, is free.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 64, temperature: float = 1.0,
                 seed: int = 0, slots: int = 16, tool_choice: str = "auto") -> None:
        import torch

        from ..agent.model_client import TOOL_CHOICES

        if tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {TOOL_CHOICES}, not {tool_choice!r}")
        self.tokenizer = tokenizer
        self.tool_choice = tool_choice
        self._constraint: Any = None

        self.model = model
        self.eos = int(tokenizer.eos_token_id)
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.slots = slots
        self.lock = threading.Lock()
        self.cache: list[tuple[list[int], Any]] = []
        # the sampler state lives on the model's device: a CUDA model's probabilities cannot be sampled with a
        # CPU generator
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.prefill_tokens = 0
        self.sampled_tokens = 0

    def clear(self) -> None:
        with self.lock:
            self.cache.clear()

    def __call__(self, prompt_ids: list[int], seed: int | None = None, temperature: float | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: str | None = None,
                 max_new_tokens: int | None = None) -> Generation:
        """One turn; ``max_new_tokens`` (at most the sampler's) is this request's budget: a constrained call
        is closed within it."""
        import torch

        if tools is None:
            tools = getattr(prompt_ids, "tools", None) or ()
        with self.lock, torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            try:
                call = self._call_state(tools, tool_choice or self.tool_choice)
                budget = min(max_new_tokens or self.max_new_tokens, self.max_new_tokens)
                return self._sample(list(prompt_ids), seed, self.temperature if temperature is None else temperature,
                                    call, budget)
            finally:
                if was_training:
                    self.model.train()

    def _call_state(self, tools: Sequence[Mapping[str, Any]], tool_choice: str) -> Any:
        if tool_choice == "required" and tools and self._constraint is None:
            from .tool_grammar import ToolCallConstraint

            self._constraint = ToolCallConstraint(self.tokenizer)  # a tokenizer that is not byte-level BPE: refused
        return call_state(self._constraint, tools, tool_choice)

    def _take(self, prompt: list[int]) -> tuple[int, Any]:
        from transformers import DynamicCache

        best, best_len = -1, 0
        for i, (ids, _) in enumerate(self.cache):
            n = _common_prefix(ids, prompt)
            if n > best_len:
                best, best_len = i, n
        if best < 0:
            return 0, DynamicCache()
        ids, past = self.cache.pop(best)
        keep = min(best_len, len(prompt) - 1)  # at least one new token is fed to get the next logits
        drop = past.get_seq_length() - keep
        if drop > 0:
            past.crop(-drop)  # this transformers' crop takes the number of tokens to remove, negated
        return keep, past

    def _sample(self, prompt: list[int], seed: int | None, temperature: float, call: Any, budget: int
                ) -> Generation:
        import torch

        device = self.device
        gen = torch.Generator(device=device).manual_seed(seed) if seed is not None else self.generator
        start, past = self._take(prompt)
        feed = torch.tensor([prompt[start:]], device=device)
        self.prefill_tokens += feed.shape[1]
        fed = list(prompt)
        ids: list[int] = []
        log_probs: list[float] = []
        finish = FINISH_LENGTH
        for step in range(budget):
            out = self.model(input_ids=feed, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].float()
            scaled = torch.log_softmax(logits / temperature if temperature > 0 else logits, -1)
            pick = scaled
            if call is not None:  # sample among the grammar's tokens; report the unconstrained log-prob
                pick = torch.full_like(scaled, float("-inf"))
                allowed = torch.tensor(call.allowed(budget - step), device=scaled.device)
                pick[allowed] = scaled[allowed]
            if temperature <= 0:
                token = int(torch.argmax(pick))
            else:
                probs = scaled.exp() if call is None else torch.softmax(pick, -1)
                token = int(torch.multinomial(probs, 1, generator=gen))
            logp = float(scaled[token])
            if call is not None:
                call.advance(token)
            ids.append(token)
            log_probs.append(logp)
            if token == self.eos:
                finish = FINISH_STOP
                break
            fed.append(token)
            feed = torch.tensor([[token]], device=device)
        self.sampled_tokens += len(ids)
        self.cache.append((fed, past))
        if len(self.cache) > self.slots:
            self.cache.pop(0)
        return Generation(ids, log_probs, finish)


def call_state(constraint: Any, tools: Sequence[Mapping[str, Any]], tool_choice: str) -> Any:
    """The grammar state of one constrained turn, or None: a free turn (not "required", no tools, or tools the
    grammar cannot express, such as a non-string argument)."""
    from ..errors import PolicyError

    if tool_choice != "required" or not tools or constraint is None:
        return None
    try:
        return constraint.start(tools)
    except PolicyError as exc:
        if exc.code != "grammar":
            raise
        return None


def accelerated(use_cpu: bool) -> bool:
    """Whether training and sampling run on CUDA in bf16 (the gpu preset on a machine that has one)."""
    if use_cpu:
        return False
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def time_budget(minutes: float | None) -> list[Any]:
    """A trainer callback that stops training once ``minutes`` of wall time have passed (none: no cap)."""
    if minutes is None:
        return []
    from transformers import TrainerCallback

    limit = minutes * 60

    class Budget(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if time.perf_counter() - self.start > limit:
                control.should_training_stop = True

    return [Budget()]

"""Batched decoding for the GPU preset: concurrent turns sampled together, the tool grammar applied over the batch.

:class:`BatchedGenerate` is called like :class:`~shopsimrl.train.local_lm.CachedGenerate` (one blocking call per
turn, from many threads at once: the rollout core's episodes, the checkpoint server's requests); a worker thread
gathers the calls waiting (up to ``max_batch``), left-pads their prompts and decodes them as one batch: one
forward per token for the whole batch, the sampler state (``torch.Generator``) on the model's device, bf16
autocast on CUDA. Under ``tool_choice="required"`` each row's grammar state gives its allowed tokens, applied as
one mask over the batch's logits (a logits processor over the batch); log-probs stay the unconstrained ones.
No lock serialises callers: they wait on their own result while the worker decodes.

There is no prefix cache: each batch prefills its prompts whole (cheap on an accelerator; on 2 CPU cores the
per-episode :class:`~shopsimrl.train.local_lm.CachedGenerate` is faster, and the CPU preset keeps it). A request
with a ``seed`` draws from its own generator, so its sample does not depend on which requests share its batch.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .rollout import FINISH_LENGTH, FINISH_STOP, Generation


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    seed: int | None
    temperature: float
    call: Any  # the grammar state (tool_choice "required") or None
    budget: int
    done: threading.Event = field(default_factory=threading.Event)
    result: Generation | None = None
    error: BaseException | None = None


def device_generator(device: Any, seed: int) -> Any:
    """A ``torch.Generator`` on ``device`` (CUDA sampling needs its generator there), seeded."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)


class BatchedGenerate:
    """``generate(prompt_ids, seed, temperature, tools, tool_choice, max_new_tokens) -> Generation``, batched."""

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 64, temperature: float = 1.0,
                 seed: int = 0, tool_choice: str = "auto", max_batch: int = 32, gather_s: float = 0.005) -> None:
        from ..agent.model_client import TOOL_CHOICES

        if tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {TOOL_CHOICES}, not {tool_choice!r}")
        self.model, self.tokenizer = model, tokenizer
        self.eos = int(tokenizer.eos_token_id)
        self.pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos)
        self.max_new_tokens, self.temperature, self.tool_choice = max_new_tokens, temperature, tool_choice
        self.max_batch, self.gather_s = max(1, max_batch), gather_s
        self.device = next(model.parameters()).device
        self.generator = device_generator(self.device, seed)
        self._constraint: Any = None
        self._pending: list[_Request] = []
        self._ready = threading.Condition()
        self._worker: threading.Thread | None = None
        self.prefill_tokens = self.sampled_tokens = 0
        self.batches: list[int] = []  # the size of every batch decoded (a benchmark reads it)

    def clear(self) -> None:
        """Nothing is cached between batches (the method CachedGenerate's callers expect)."""

    def __call__(self, prompt_ids: list[int], seed: int | None = None, temperature: float | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: str | None = None,
                 max_new_tokens: int | None = None) -> Generation:
        from .local_lm import call_state

        if tools is None:
            tools = getattr(prompt_ids, "tools", None) or ()
        if self._constraint is None and (tool_choice or self.tool_choice) == "required" and tools:
            from .tool_grammar import ToolCallConstraint

            self._constraint = ToolCallConstraint(self.tokenizer)
        request = _Request(list(prompt_ids), seed, self.temperature if temperature is None else temperature,
                           call_state(self._constraint, tools, tool_choice or self.tool_choice),
                           min(max_new_tokens or self.max_new_tokens, self.max_new_tokens))
        with self._ready:
            self._pending.append(request)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._serve, daemon=True, name="batched-generate")
                self._worker.start()
            self._ready.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _serve(self) -> None:
        while True:
            with self._ready:
                if not self._ready.wait_for(lambda: bool(self._pending), timeout=5.0):
                    self._worker = None  # idle: a later call starts a fresh worker
                    return
            time.sleep(self.gather_s)  # let the other callers of this turn join the batch
            with self._ready:
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            try:
                for request, result in zip(batch, self.decode(batch), strict=True):
                    request.result = result
            except BaseException as exc:  # every waiting caller gets the error, none hangs
                for request in batch:
                    request.error = exc
            for request in batch:
                request.done.set()

    def decode(self, batch: Sequence[_Request]) -> list[Generation]:
        """One batch: left-padded prefill, then one forward per token for every row still sampling."""
        import torch

        was_training = self.model.training
        self.model.eval()
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if self.device.type == "cuda"
                    else contextlib.nullcontext())
        try:
            with torch.no_grad(), autocast:
                return self._decode(batch)
        finally:
            if was_training:
                self.model.train()

    def _decode(self, batch: Sequence[_Request]) -> list[Generation]:
        import torch
        from transformers import DynamicCache

        self.batches.append(len(batch))
        width = max(len(r.prompt) for r in batch)
        ids = torch.tensor([[self.pad] * (width - len(r.prompt)) + r.prompt for r in batch], device=self.device)
        mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in batch], device=self.device)
        self.prefill_tokens += sum(len(r.prompt) for r in batch)
        gens = [device_generator(self.device, r.seed) if r.seed is not None else self.generator for r in batch]
        temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in batch], device=self.device)
        outs: list[list[int]] = [[] for _ in batch]
        logps: list[list[float]] = [[] for _ in batch]
        live = [True] * len(batch)
        finish = [FINISH_LENGTH] * len(batch)
        past, feed, positions = DynamicCache(), ids, (mask.cumsum(-1) - 1).clamp(min=0)
        for step in range(max(r.budget for r in batch)):
            out = self.model(input_ids=feed, attention_mask=mask, position_ids=positions, past_key_values=past,
                             use_cache=True)
            past = out.past_key_values
            scaled = torch.log_softmax(out.logits[:, -1].float() / temps[:, None], -1)
            pick = self._mask(batch, scaled, step, live)
            tokens = self._draw(batch, pick, gens, live)
            chosen = scaled.gather(1, torch.tensor(tokens, device=self.device)[:, None])[:, 0].tolist()
            for i, request in enumerate(batch):
                if not live[i]:
                    continue
                if request.call is not None:
                    request.call.advance(tokens[i])
                outs[i].append(tokens[i])
                logps[i].append(float(chosen[i]))
                if tokens[i] == self.eos:
                    live[i], finish[i] = False, FINISH_STOP
                elif len(outs[i]) >= request.budget:
                    live[i] = False
            if not any(live):
                break
            feed = torch.tensor([[t if live[i] else self.pad] for i, t in enumerate(tokens)], device=self.device)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            positions = positions[:, -1:] + 1
        self.sampled_tokens += sum(len(o) for o in outs)
        return [Generation(o, lp, f) for o, lp, f in zip(outs, logps, finish, strict=True)]

    def _mask(self, batch: Sequence[_Request], scaled: Any, step: int, live: list[bool]) -> Any:
        """The grammar over the batch: every constrained row's disallowed tokens set to -inf, in one scatter."""
        import torch

        rows, cols = [], []
        for i, request in enumerate(batch):
            if live[i] and request.call is not None:
                allowed = request.call.allowed(request.budget - step)
                rows += [i] * len(allowed)
                cols += allowed
        if not rows:
            return scaled
        constrained = torch.tensor(sorted({r for r in rows}), device=scaled.device)
        keep = torch.zeros_like(scaled, dtype=torch.bool)
        keep[torch.tensor(rows, device=scaled.device), torch.tensor(cols, device=scaled.device)] = True
        keep[~torch.isin(torch.arange(len(batch), device=scaled.device), constrained)] = True
        return scaled.masked_fill(~keep, float("-inf"))

    def _draw(self, batch: Sequence[_Request], pick: Any, gens: list[Any], live: list[bool]) -> list[int]:
        """Each live row's token: greedy at temperature 0, else a draw from its own generator."""
        import torch

        greedy = torch.argmax(pick, -1).tolist()
        probs = torch.softmax(pick, -1)
        tokens = []
        for i, request in enumerate(batch):
            if not live[i] or request.temperature <= 0:
                tokens.append(int(greedy[i]))
            else:
                tokens.append(int(torch.multinomial(probs[i], 1, generator=gens[i])))
        return tokens

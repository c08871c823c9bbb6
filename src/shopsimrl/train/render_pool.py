"""Chat-template rendering and tokenization off the event loop, and re-segment mode's incremental prompt.

Rendering a chat template (Jinja) and tokenizing it are CPU work: done on the event loop, concurrent episodes
serialize behind them and every other coroutine (HTTP to the environment, the inference server) waits. The
rollout core runs them in one bounded thread pool (:data:`POOL`, as verl's own agent loops hand tokenization
to an executor); the token ledger, the decisions and the environment calls stay on the loop. HF's fast
tokenizers release the GIL while encoding, so the pool also overlaps real work.

Re-segment mode re-tokenizes the whole conversation canonically every turn (so that a sampled tokenization
that differs from the re-encoded one forks a segment). For a prefix-preserving template that costs O(length)
per turn for nothing: what the new messages add does not depend on the earlier ones. :func:`resegment_tail`
renders only the new messages behind a short stand-in system and user message and tokenizes that text alone;
the previous canonical prompt ids plus these ids are the new canonical prompt (tests compare it with the full
render for every template family), so the per-turn cost is flat in the conversation's length.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .chat_template import encode, render_text

T = TypeVar("T")
POOL_THREADS = max(2, min(4, os.cpu_count() or 2))  # Jinja holds the GIL: more threads only crowd the loop
POOL = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="shopsim-render")
WINDOW_HEAD = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in the render pool (context variables are not needed there)."""
    return await asyncio.get_running_loop().run_in_executor(POOL, fn, *args)


def resegment_tail(tokenizer: Any, messages: Sequence[Mapping[str, Any]], turn_start: int,
                   tools: Sequence[Mapping[str, Any]], cache: dict[Any, Any]) -> list[int] | None:
    """Canonical ids of what ``messages[turn_start:]`` and the next generation prompt add to the previous
    prompt (None: the window does not extend its head, render in full)."""
    key = ("resegment_head", len(tools), tuple(t.get("function", {}).get("name") for t in tools))
    head = cache.get(key)
    if head is None:
        head = cache[key] = render_text(tokenizer, list(WINDOW_HEAD), tools, add_generation_prompt=True)
    text = render_text(tokenizer, [*WINDOW_HEAD, *messages[turn_start:]], tools, add_generation_prompt=True)
    if not text.startswith(head):
        return None
    return encode(tokenizer, text[len(head):])

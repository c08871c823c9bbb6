"""Serve a local checkpoint as an OpenAI-compatible chat endpoint, so ``shopsimrl eval`` measures it through the
same runtime, validator and run directory as any served model (vLLM, SGLang, a hosted API).

The server renders the conversation with the checkpoint's own chat template and the episode tool list the
rollout core trains with (:func:`~shopsimrl.train.chat_template.episode_tools`: ``search``/``click`` without
the per-page enum, whose values are in the observation text), samples with :class:`CachedGenerate` (one request
at a time, prefix-cached: CPU) or :class:`~.batched_generate.BatchedGenerate` (concurrent requests batched) and answers
with the sampled text as ``content`` (``<tool_call>`` JSON, which the runtime's validator reads like vLLM's
Hermes parser would). ``tool_choice`` is honoured as vLLM does: ``"required"`` (or one named function) constrains
decoding to one call of the request's own tools, enums included (:mod:`~shopsimrl.train.tool_grammar`); ``"auto"``
and ``"none"`` sample freely. A prompt of ``max_context`` tokens or more is answered ``finish_reason="length"``
without sampling: the same prompt cap the training rollouts apply (the episode ends as ``generation_length``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fastapi import Request  # resolved at route registration (postponed annotations)

from ._turn_text import render_prompt
from .chat_template import episode_tools
from .local_lm import CachedGenerate


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages → what chat templates expect: tool-call arguments as objects, not JSON strings."""
    out: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        calls = []
        for call in message.get("tool_calls") or []:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):
                    parsed = json.loads(arguments) if arguments.strip() else {}
                    if isinstance(parsed, dict):
                        function["arguments"] = parsed
            calls.append({**call, "function": function})
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def constrained_tools(body: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], str]:
    """The request's tools a call must come from, and the sampler's tool choice ("required" or "auto")."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):  # {"type": "function", "function": {"name": ...}}: that tool only
        name = (choice.get("function") or {}).get("name")
        tools = [t for t in tools if (t.get("function") or {}).get("name") == name]
        return tools, "required" if tools else "auto"
    return tools, "required" if choice == "required" and tools else "auto"


def create_app(model: Any, tokenizer: Any, *, model_name: str, max_new_tokens: int = 64,
               max_context: int | None = None, max_batch: int | None = None) -> Any:
    """``max_batch``: concurrent requests decoded together, up to that many (:class:`~.batched_generate.
    BatchedGenerate`, no lock between requests); None: one at a time with the prefix-cached sampler (CPU)."""
    from fastapi import FastAPI

    from .batched_generate import BatchedGenerate

    app = FastAPI()
    sampler: Any = (CachedGenerate(model, tokenizer, max_new_tokens=max_new_tokens, slots=64) if max_batch is None
                    else BatchedGenerate(model, tokenizer, max_new_tokens=max_new_tokens, max_batch=max_batch))
    tools = episode_tools()
    app.state.sampler = sampler

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        import asyncio

        body = await request.json()
        prompt = render_prompt(tokenizer, template_messages(body["messages"]), tools)
        limit = min(int(body.get("max_tokens") or max_new_tokens), max_new_tokens)
        temperature = float(body.get("temperature", 1.0))
        seed = body.get("seed")
        call_tools, choice = constrained_tools(body)
        if max_context is not None and len(prompt) >= max_context:
            text, finish, sampled = "", "length", 0
        else:
            gen = await asyncio.to_thread(sampler, prompt, seed if isinstance(seed, int) else None, temperature,
                                          call_tools, choice, limit)
            ids = list(gen.token_ids)[:limit]
            text = tokenizer.decode(ids, skip_special_tokens=False)
            if text.endswith(tokenizer.eos_token):
                text = text[: -len(tokenizer.eos_token)]
            finish, sampled = ("stop" if gen.finish_reason == "stop" else "length"), len(ids)
        return {"id": f"chatcmpl-{len(prompt)}-{sampled}", "object": "chat.completion", "created": 0,
                "model": model_name,
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": sampled,
                          "total_tokens": len(prompt) + sampled}}

    return app


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run ``app`` on a free loopback port in a thread; yields its ``…/v1`` base URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the checkpoint server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)

"""Any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, Ollama, hosted APIs) via the ``openai`` client.

The official client does transport, timeouts and retries (408/409/429/5xx and connection errors, with
exponential back-off); a 200 answer is never retried on protocol grounds. The raw JSON body is parsed by the
shared validator, so ``reasoning_content``/``reasoning``, ``tool_calls``, ``usage`` and tool calls written in the
content (``<tool_call>…</tool_call>``) are read the same way for every server.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelCallError, ShopSimError
from ._streaming import fold_chunks
from .turn import wire_messages
from .validation import ModelOutput, interpret

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TEMPERATURE = 0.6
DEFAULT_TOP_P = 1.0
DEFAULT_TIMEOUT = 180.0
DEFAULT_MAX_RETRIES = 3
TOOL_CHOICES = ("auto", "required")
RESERVED_BODY_KEYS = {"model", "messages", "tools", "tool_choice", "stream"}


@dataclass(frozen=True)
class ModelSettings:
    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float | None = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    send_seed: bool = False
    checkpoint_id: str | None = None
    stream: bool = False  # ask for server-sent events (for servers that only stream); folded into one answer
    send_task_id: bool = False  # body field shopsim_task_id: for the policy server's oracles only (eval --send-task-id)
    tool_choice: str = "auto"  # "required": the server must answer with a call (vLLM then constrains decoding)

    def __post_init__(self) -> None:
        clash = RESERVED_BODY_KEYS & set(self.extra_body)
        if clash:
            raise ShopSimError(f"extra body may not set {sorted(clash)}: the runtime owns them")
        if self.max_tokens < 1:
            raise ShopSimError("max_tokens must be positive")
        if self.tool_choice not in TOOL_CHOICES:
            raise ShopSimError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, not {self.tool_choice!r}")

    def identity(self) -> dict[str, Any]:
        """Provenance: everything that shapes an answer (the key itself is never recorded)."""
        transport: dict[str, Any] = {"timeout": self.timeout, "max_retries": self.max_retries}
        if self.stream:
            transport["stream"] = True
        if self.send_task_id:  # absent otherwise, so existing plan fingerprints stay as they were
            transport["send_task_id"] = True
        return {
            "provider": "openai-compatible", "model": self.model, "base_url": self.base_url,
            "checkpoint_id": self.checkpoint_id, "api_key_env": self.api_key_env,
            "transport": transport,
            "sampling": {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                         "tool_choice": self.tool_choice, "send_seed": self.send_seed,
                         "extra_body": dict(sorted(self.extra_body.items()))},
        }


class OpenAIChatModel:
    """One client per evaluation (connection pool shared by all episodes)."""

    def __init__(self, settings: ModelSettings) -> None:
        from openai import AsyncOpenAI

        self.settings = settings
        key = "EMPTY"  # local servers ignore the key; the client insists on one
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env, "")
            if not key:
                raise ShopSimError(f"environment variable {settings.api_key_env} (the API key) is not set")
        self.model_name = settings.model
        self._client = AsyncOpenAI(
            base_url=settings.base_url, api_key=key, timeout=settings.timeout, max_retries=settings.max_retries
        )

    def identity(self) -> dict[str, Any]:
        return self.settings.identity()

    def extra_body(self, task_id: int | None) -> dict[str, Any] | None:
        """The configured extra body, plus ``shopsim_task_id`` with ``send_task_id`` (the policy server's oracles)."""
        body = dict(self.settings.extra_body)
        if self.settings.send_task_id and task_id is not None:
            body["shopsim_task_id"] = task_id
        return body or None

    def request_body(self, tools: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.send_seed:
            body["seed"] = seed
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = s.tool_choice
        return body

    async def generate(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
        seed: int = 0, task_id: int | None = None,
    ) -> ModelOutput:
        import openai

        started = time.perf_counter()
        try:
            if self.settings.stream:
                payload: Any = await self._streamed(messages, tools, seed, task_id)
                return interpret(payload, tools, latency_ms=round((time.perf_counter() - started) * 1000, 3))
            raw = await self._client.chat.completions.with_raw_response.create(
                model=self.settings.model, messages=wire_messages(messages), stream=False,  # type: ignore[arg-type]
                extra_body=self.extra_body(task_id), **self.request_body(tools, seed),
            )
        except openai.APIStatusError as exc:
            raise ModelCallError(f"model endpoint answered HTTP {exc.status_code}: {exc.message}", code="model_request") from exc
        except openai.APIError as exc:  # "Connection error." alone hides why: name the underlying cause
            cause = exc.__cause__ or exc.__context__
            detail = f"{exc} ({type(cause).__name__}: {cause})" if cause is not None else str(exc)
            raise ModelCallError(f"model endpoint {self.settings.base_url} failed: {detail}", code="model_request") from exc
        text = raw.text
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return interpret(payload, tools, latency_ms=round((time.perf_counter() - started) * 1000, 3))

    async def _streamed(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], seed: int,
        task_id: int | None = None,
    ) -> dict[str, Any]:
        """One streamed request, its chunks folded back into the ``chat.completion`` JSON the validator reads."""
        # the wire messages and request body are plain JSON dicts, not the SDK's TypedDicts: no overload matches
        stream = await self._client.chat.completions.create(  # type: ignore[call-overload]
            model=self.settings.model, messages=wire_messages(messages), stream=True,
            stream_options={"include_usage": True},
            extra_body=self.extra_body(task_id), **self.request_body(tools, seed),
        )
        chunks = [chunk.model_dump(exclude_none=True) async for chunk in stream]
        return fold_chunks(chunks)

    async def close(self) -> None:
        await self._client.close()

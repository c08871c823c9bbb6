"""A generate function for an OpenAI-compatible vLLM or SGLang server: token ids in, ids and log-probs out.

The rollout core needs the exact sampled token ids and their log-probs, which chat completions do not give.
This speaks ``POST /v1/completions`` with the prompt as a list of token ids (both servers accept it) and asks
for what vLLM returns: ``logprobs: 1`` with ``return_tokens_as_token_ids`` (tokens come back as
``"token_id:N"``), ``return_token_ids`` (newer vLLM: ``choices[0].token_ids``), special tokens kept and the
stop string included, so the end-of-turn token is part of the sample. ``max_tokens`` is the per-turn cap;
``finish_reason == "length"`` is reported as a cut-off. SGLang's ``output_token_logprobs`` shape is read too.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelCallError
from .rollout import FINISH_ABORT, FINISH_LENGTH, FINISH_STOP, Generation


def _token_id(token: Any) -> int:
    if isinstance(token, int):
        return token
    if isinstance(token, str) and token.startswith("token_id:"):
        return int(token.split(":", 1)[1])
    raise ModelCallError(f"token {token!r} is not an id: start vLLM so that it honours "
                              "return_tokens_as_token_ids (vLLM >= 0.6)", code="server_generate")


def parse_completion(payload: Mapping[str, Any]) -> Generation:
    """A ``/v1/completions`` answer (vLLM or SGLang shape) → :class:`Generation`."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelCallError("the completion has no choices", code="server_generate")
    choice = choices[0]
    logprobs = choice.get("logprobs") or {}
    ids: list[int]
    values: list[float]
    if isinstance(logprobs, Mapping) and isinstance(logprobs.get("token_logprobs"), list):
        values = [float(v) if v is not None else math.nan for v in logprobs["token_logprobs"]]
        ids = list(choice["token_ids"]) if isinstance(choice.get("token_ids"), list) else [
            _token_id(t) for t in logprobs.get("tokens") or []]
    elif isinstance(choice.get("meta_info"), Mapping) and "output_token_logprobs" in choice["meta_info"]:
        rows = choice["meta_info"]["output_token_logprobs"]  # SGLang: [logprob, token_id, text]
        values, ids = [float(r[0]) for r in rows], [int(r[1]) for r in rows]
    else:
        raise ModelCallError("the completion has no per-token log-probs: request logprobs=1", code="server_generate")
    if len(ids) != len(values):
        raise ModelCallError(f"{len(values)} log-probs for {len(ids)} tokens", code="server_generate")
    reason = choice.get("finish_reason")
    finish = FINISH_LENGTH if reason == "length" else FINISH_ABORT if reason == "abort" else FINISH_STOP
    return Generation([int(i) for i in ids], values, finish)


def server_generate(base_url: str, model: str, *, max_tokens: int = 512, temperature: float = 1.0,
                    top_p: float = 1.0, stop_token_ids: Sequence[int] | None = None, timeout: float = 300.0,
                    api_key: str | None = None, extra_body: Mapping[str, Any] | None = None,
                    max_context: int | None = None,
                    ) -> Callable[[list[int]], Awaitable[Generation]]:
    """An async ``generate(prompt_ids)`` against ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    ``max_context`` (the server's ``--max-model-len``): each turn asks for at most ``max_context − len(prompt)``
    tokens, so the server never rejects a long episode's prompt (it would otherwise drop out of training)."""
    import httpx

    url = base_url.rstrip("/") + "/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    clients: dict[int, httpx.AsyncClient] = {}

    async def generate(prompt_ids: list[int]) -> Generation:
        import asyncio

        loop_id = id(asyncio.get_running_loop())  # one pooled client per event loop (TRL runs one per batch)
        client = clients.get(loop_id)
        if client is None:
            clients.clear()
            client = clients[loop_id] = httpx.AsyncClient(timeout=timeout, headers=headers)
        turn_cap = max_tokens if max_context is None else max(1, min(max_tokens, max_context - len(prompt_ids)))
        body: dict[str, Any] = {
            "model": model, "prompt": list(prompt_ids), "max_tokens": turn_cap, "temperature": temperature,
            "top_p": top_p, "logprobs": 1, "echo": False, "return_tokens_as_token_ids": True,
            "return_token_ids": True, "skip_special_tokens": False, "include_stop_str_in_output": True,
        }
        if stop_token_ids:
            body["stop_token_ids"] = list(stop_token_ids)
        body.update(extra_body or {})
        try:
            response = await client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise ModelCallError(f"inference server at {url}: {type(exc).__name__}: {exc}", code="server_generate") from exc
        if response.status_code != 200:
            raise ModelCallError(f"inference server at {url} answered {response.status_code}: "
                                      f"{response.text[:300]}", code="server_generate")
        return parse_completion(response.json())

    return generate

"""The LLM shopper: any OpenAI-compatible chat endpoint plays the shopper, through the official ``openai`` client.

Each request is the whole shopper conversation (system prompt with the rules and the shopper's knowledge, the
harness's ``请提供您的购物需求。``, the opening, then every question and reply), sent with temperature 0 and the
episode's seed (``ShopperConfig.sample_seed``). Replies are cached by a hash of that request (``reply_cache``),
so a repeated or resumed run replays them without calls. A failed call (HTTP error after the client's retries,
a connection error, an empty reply) raises :class:`ShopperCallError` for question ``k`` (0: the opening): the
episode fails technically at ``shopper_step_k`` and no reply is ever made up. Replies are cut to
``MAX_REPLY_CHARS`` on one line.

Slot recall for the metrics is read from the replies: a slot counts as revealed once a reply contains one of
its wordings (an LLM may paraphrase, so this is a lower bound); a slot with nothing to say (no budget) once a
question names it (the rule shopper's lexicon).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import RequestError, ShopperCallError
from ..versions import LLM_SHOPPER_VERSION
from .config import ShopperConfig
from .lexicon import match_question
from .llm_prompt import INCOMPLETE_PREFIX, conversation_start
from .replies import NEUTRAL_REPLY
from .reply_cache import ReplyCache, cache_key
from .rule_shopper import ShopperReply
from .slots import BUDGET, PRODUCT, Slot, build_slots, format_amount

MAX_REPLY_CHARS = 300
DEFAULT_MAX_TOKENS = 256
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
TEMPERATURE = 0.0
RESERVED_BODY_KEYS = frozenset({"model", "messages", "temperature", "seed", "max_tokens", "stream", "tools"})
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)  # lazy, no nesting: one linear scan
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class LLMShopperSettings:
    """Where the LLM shopper lives and how it is asked (the key is read from ``api_key_env``, never stored)."""

    base_url: str
    model: str
    api_key_env: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None  # None: no cache (every request is sent)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url or not isinstance(self.model, str) or not self.model:
            raise RequestError("the LLM shopper needs a base URL and a model name", code="dialogue_unavailable")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or not 1 <= self.max_tokens <= 8192:
            raise RequestError("the LLM shopper's max_tokens must be an integer between 1 and 8192", code="dialogue_unavailable")
        if not isinstance(self.max_retries, int) or self.max_retries < 0 or not self.timeout > 0:
            raise RequestError("the LLM shopper's timeout must be positive and max_retries at least 0", code="dialogue_unavailable")
        clash = RESERVED_BODY_KEYS & set(self.extra_body)
        if clash:
            raise RequestError(f"the shopper's extra body may not set {sorted(clash)}: the shopper owns them", code="dialogue_unavailable")

    def sampling(self) -> dict[str, Any]:
        """What shapes a reply besides the conversation (part of every cache key)."""
        return {"protocol": LLM_SHOPPER_VERSION, "model": self.model, "temperature": TEMPERATURE,
                "max_tokens": self.max_tokens, "extra_body": dict(sorted(self.extra_body.items()))}

    def identity(self) -> dict[str, Any]:
        """Provenance for a run plan (no key, no cache directory)."""
        return {**self.sampling(), "base_url": self.base_url, "api_key_env": self.api_key_env}


class ShopperEndpoint:
    """One client (connection pool) and one reply cache, shared by every episode of an environment factory."""

    def __init__(self, settings: LLMShopperSettings) -> None:
        self.settings = settings
        self.cache = ReplyCache(settings.cache_dir) if settings.cache_dir else None
        self._key = "EMPTY"  # local servers ignore the key; the client insists on one
        if settings.api_key_env:
            self._key = os.environ.get(settings.api_key_env, "")
            if not self._key:
                raise RequestError(f"environment variable {settings.api_key_env} (the shopper's API key) is not set", code="dialogue_unavailable")
        self._client: Any = None
        self._lock = threading.Lock()
        self.calls = 0  # requests sent (cache hits excluded)
        self.cache_hits = 0

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                s = self.settings
                self._client = OpenAI(base_url=s.base_url, api_key=self._key, timeout=s.timeout,
                                      max_retries=s.max_retries)
            return self._client

    def check_reachable(self) -> None:
        """One ``GET /models`` before the first episode: an endpoint that is down or refuses the key fails the run
        once, up front (``RequestError`` (``dialogue_unavailable``) naming ``--shopper-base-url``), not in every episode. Any other answer
        (even a 404 from a server without ``/models``) counts as reachable."""
        import openai

        s = self.settings
        try:
            self._openai().with_options(max_retries=0, timeout=min(s.timeout, 15.0)).models.list()
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise RequestError(f"the LLM shopper's endpoint --shopper-base-url {s.base_url} refused the key "
                                    f"(HTTP {exc.status_code}; --shopper-api-key-env)", code="dialogue_unavailable") from exc
        except openai.APIError as exc:
            cause = exc.__cause__ or exc.__context__
            raise RequestError(f"the LLM shopper's endpoint --shopper-base-url {s.base_url} cannot be reached "
                                f"({cause or exc}); start it or fix the URL", code="dialogue_unavailable") from exc

    def complete(self, messages: list[dict[str, str]], *, seed: int, question_index: int) -> tuple[str, bool]:
        """The reply to ``messages`` and whether it came from the cache; :class:`ShopperCallError` on failure."""
        request = {**self.settings.sampling(), "seed": seed, "messages": messages}
        key = cache_key(request)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                with self._lock:
                    self.cache_hits += 1
                return cached, True
        reply, finish = self._call(messages, seed, question_index)
        if self.cache is not None:
            self.cache.put(key, reply, finish)
        return reply, False

    def _call(self, messages: list[dict[str, str]], seed: int, question_index: int) -> tuple[str, str | None]:
        import openai

        s = self.settings
        with self._lock:
            self.calls += 1
        try:
            completion = self._openai().chat.completions.create(
                model=s.model, messages=messages, temperature=TEMPERATURE, seed=seed, max_tokens=s.max_tokens,
                extra_body=dict(s.extra_body) or None,
            )
        except openai.APIStatusError as exc:
            raise ShopperCallError(question_index, f"endpoint answered HTTP {exc.status_code}: {exc.message}") from exc
        except openai.APIError as exc:
            cause = exc.__cause__ or exc.__context__
            detail = f"{exc} ({type(cause).__name__}: {cause})" if cause is not None else str(exc)
            raise ShopperCallError(question_index, f"endpoint {s.base_url} failed: {detail}") from exc
        choices = getattr(completion, "choices", None) or []
        content = choices[0].message.content if choices else None
        reply = clean_reply(content if isinstance(content, str) else "")
        if not reply:
            raise ShopperCallError(question_index, "the endpoint answered without reply text")
        return reply, getattr(choices[0], "finish_reason", None)


def clean_reply(text: str) -> str:
    """Reasoning blocks dropped, whitespace folded to single spaces (one observation line), at most
    ``MAX_REPLY_CHARS`` characters."""
    text = _THINK.sub(" ", text[: MAX_REPLY_CHARS * 64])
    if "</think>" in text:  # an unterminated block's tail: keep what follows the close tag
        text = text.rsplit("</think>", 1)[1]
    return _SPACE.sub(" ", text).strip()[:MAX_REPLY_CHARS]


def reply_intent(reply: str) -> str:
    if reply.startswith(INCOMPLETE_PREFIX):
        return "purchase_incomplete"
    if reply == NEUTRAL_REPLY:
        return "neutral"
    return "reply"


def _wordings(slot: Slot) -> tuple[str, ...]:
    if slot.kind == BUDGET and slot.price_upper is not None:
        return (*slot.surfaces, format_amount(slot.price_upper))
    return slot.surfaces


class LLMShopper:
    """One episode's LLM shopper: the conversation so far, the slots its replies have named, the transcript."""

    name = "llm"
    version = LLM_SHOPPER_VERSION

    def __init__(
        self,
        goal: Mapping[str, Any],
        product: Mapping[str, Any] | None,
        config: ShopperConfig | None,
        endpoint: ShopperEndpoint,
    ) -> None:
        self.config = config or ShopperConfig()
        self.endpoint = endpoint
        self.task_id = int(goal["task_id"])
        self.slots: tuple[Slot, ...] = build_slots(goal, product)  # only to score slot recall
        self.messages = conversation_start(goal)
        self.revealed: set[int] = {slot.index for slot in self.slots if slot.kind == PRODUCT}
        self.turns = 0
        self.transcript: list[dict[str, Any]] = []
        self._opening: str | None = None

    def opening(self) -> str:
        """The shopper's answer to ``请提供您的购物需求。`` (asked once, at reset: question index 0)."""
        if self._opening is None:
            text, _ = self.endpoint.complete(self.messages, seed=self.config.sample_seed, question_index=0)
            self.messages.append({"role": "assistant", "content": text})
            self._notice(text)
            self._opening = text
        return self._opening

    def reply(self, question: str) -> ShopperReply:
        """Answer one question; on failure nothing changes (the question is not part of the conversation)."""
        asked = [*self.messages, {"role": "user", "content": question}]
        text, cached = self.endpoint.complete(asked, seed=self.config.sample_seed, question_index=self.turns + 1)
        self.messages = [*asked, {"role": "assistant", "content": text}]
        named = self._notice(text)
        asked_about = match_question(question, self.slots).slots
        self.revealed.update(i for i in asked_about if not _wordings(self.slots[i]))  # nothing to say: asked = told
        answer = ShopperReply(text, reply_intent(text), named)
        self.turns += 1
        self.transcript.append({"question": question, **answer.as_dict(), "cached": cached})
        return answer

    def _notice(self, text: str) -> tuple[str, ...]:
        folded = text.casefold()
        named = [slot for slot in self.slots if any(w and w.casefold() in folded for w in _wordings(slot))]
        self.revealed.update(slot.index for slot in named)
        return tuple(slot.name for slot in named if slot.kind != PRODUCT)

    def missing(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.index not in self.revealed]

    def slot_recall(self) -> tuple[int, int]:
        return len(self.revealed), len(self.slots)


def add_shopper_arguments(parser: Any, *, cache: bool = False) -> None:
    """The ``--shopper-*`` flags of ``eval`` and ``serve`` (``cache``: serve's ``--shopper-cache DIR``)."""
    parser.add_argument("--shopper-base-url", help="the LLM shopper's OpenAI-compatible endpoint (shopper 'llm')")
    parser.add_argument("--shopper-model", help="the model name at --shopper-base-url")
    parser.add_argument("--shopper-api-key-env", metavar="VAR", help="environment variable holding its API key")
    parser.add_argument("--shopper-max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"reply token limit (default {DEFAULT_MAX_TOKENS}; replies are cut to {MAX_REPLY_CHARS} characters)")
    parser.add_argument("--shopper-extra-body", metavar="JSON",
                        help='JSON merged into each shopper request, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\'')
    if cache:
        parser.add_argument("--shopper-cache", metavar="DIR", help="cache the LLM shopper's replies in DIR")


def shopper_settings_from_args(args: Any, *, cache_dir: str | None = None) -> LLMShopperSettings | None:
    """The settings the ``--shopper-*`` flags describe, or None when none is given."""
    base_url, model = args.shopper_base_url, args.shopper_model
    if not base_url and not model:
        if args.shopper_api_key_env or args.shopper_extra_body:
            raise RequestError("--shopper-api-key-env/--shopper-extra-body need --shopper-base-url and --shopper-model", code="dialogue_unavailable")
        return None
    if not (base_url and model):
        raise RequestError("--shopper-base-url and --shopper-model go together", code="dialogue_unavailable")
    extra: Any = {}
    if args.shopper_extra_body:
        try:
            extra = json.loads(args.shopper_extra_body)
        except ValueError as exc:
            raise RequestError(f"--shopper-extra-body must be a JSON object: {exc}", code="dialogue_unavailable") from exc
        if not isinstance(extra, dict):
            raise RequestError("--shopper-extra-body must be a JSON object", code="dialogue_unavailable")
    return LLMShopperSettings(base_url=base_url, model=model, api_key_env=args.shopper_api_key_env,
                              max_tokens=args.shopper_max_tokens, extra_body=extra,
                              cache_dir=cache_dir or getattr(args, "shopper_cache", None))

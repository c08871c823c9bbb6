"""``shopsimrl policy-server``: an OpenAI-compatible chat-completions server driven by a built-in policy.

It speaks the real protocol (``POST /v1/chat/completions`` with ``tools`` in; ``tool_calls``,
``finish_reason`` and ``usage`` out; ``GET /v1/models``), so a pipeline can be smoke-tested end to end — the
``openai`` client, retries, parsing, validation and repair — without a hosted model. The policy sees the
context rebuilt from the messages, exactly as in-process.

Faults can be injected to exercise every failure path: per request (header ``X-ShopSim-Fault: KIND`` or body
field ``shopsim_fault``), scripted per model turn (body field ``shopsim_fault_script: {"2": "bad_json"}``; the
runtime's ``extra_body`` carries it on every request), or server-wide at a seeded rate (``--fault-rate``,
``--length-rate``), decided by a hash of the request so reruns see the same faults.

``--policy rule-shopper`` answers shopper conversations instead (no tools): the rule shopper plays the LLM
shopper's endpoint (``shopper_backend.py``). ``--policy dialogue-oracle`` (like ``oracle``) finds its task
from the body field ``shopsim_task_id`` when the visible task (the shopper's opening) cannot name it
(``eval --send-task-id``).

``stream=true`` gets the same answer (faults included) as server-sent events with tool-call deltas
(``stream_options.include_usage`` adds the usage chunk), which clients such as ``vf-eval`` require. Clients that
list tools once per episode (a ``click`` without enum) get the page's own tools rebuilt from the page text.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..contract import CLICK_TOOL, PAGE_TOOL_NAMES, SEARCH_TOOL, VALUE_ARGUMENT, is_task_id
from ..env.shop_env import ShopWorld
from ..env.tools import argument_key
from ..errors import ConfigError, PolicyError, ShopSimError
from ._streaming import completion_chunks, sse_events
from .builtin_backend import action_completion, policy_action
from .page_tools import page_tools
from .policies import make_policy
from .policy import PolicyAction
from .shopper_backend import SHOPPER_FAULTS, SHOPPER_POLICY, ScriptedShopper, question_index, text_completion
from .validation import offered_names

PROTOCOL_FAULTS = (
    "no_tool_call", "two_calls", "mixed_content", "bad_json", "unavailable_tool", "wrong_keys",
    "click_outside_enum",
)
OTHER_FAULTS = ("length", "length_with_call", "content_tool_call", "content_tool_call_xml", "http_429_once",
                "http_500_once", "http_500", "empty_reply")
FAULT_KINDS = PROTOCOL_FAULTS + OTHER_FAULTS
OUTSIDE_ENUM_VALUE = "not-an-offered-value"
FAULT_HEADER = "x-shopsim-fault"


@dataclass(frozen=True)
class FaultConfig:
    """Server-wide faults: ``rate`` of requests get one of ``kinds``, ``length_rate`` are cut off."""

    rate: float = 0.0
    kinds: tuple[str, ...] = PROTOCOL_FAULTS
    seed: int = 0
    length_rate: float = 0.0

    def __post_init__(self) -> None:
        for kind in self.kinds:
            check_fault(kind)
        if not (0.0 <= self.rate <= 1.0 and 0.0 <= self.length_rate <= 1.0 and self.rate + self.length_rate <= 1.0):
            raise ConfigError("fault rates must be in [0, 1] and sum to at most 1", code="fault")

    def draw(self, digest: str) -> str | None:
        if not self.rate and not self.length_rate:
            return None
        value = hashlib.sha256(f"{self.seed}:{digest}".encode()).digest()
        u = int.from_bytes(value[:8], "big") / 2**64
        if u < self.length_rate:
            return "length"
        if u < self.length_rate + self.rate and self.kinds:
            return self.kinds[int.from_bytes(value[8:16], "big") % len(self.kinds)]
        return None


def check_fault(kind: Any) -> str:
    if kind not in FAULT_KINDS:
        raise ConfigError(f"unknown fault {kind!r}; choose one of {', '.join(FAULT_KINDS)}", code="fault")
    return str(kind)


def model_turn(messages: Sequence[Mapping[str, Any]]) -> int:
    """The 1-based model turn a request is for (each earlier turn left one assistant or feedback message)."""
    turn, seen_user, previous = 1, False, None
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            turn += 1
        elif role == "user":
            if seen_user and previous != "assistant":
                turn += 1
            seen_user = True
        previous = role
    return turn


def apply_fault(
    kind: str, completion: dict[str, Any], action: PolicyAction, tools: Sequence[Mapping[str, Any]], *,
    max_tokens: int = 4096,
) -> dict[str, Any]:
    """Rewrite a correct completion into one showing ``kind``."""
    out = copy.deepcopy(completion)
    choice = out["choices"][0]
    message = choice["message"]
    call = message["tool_calls"][0]
    function = call["function"]
    key = argument_key(action.name) or VALUE_ARGUMENT
    value = str(action.arguments.get(key, ""))
    if kind == "no_tool_call":
        message["content"] = f"Thought: 我应该这样做。\nAction: {action.canonical}"
        message["tool_calls"] = None
        choice["finish_reason"] = "stop"
    elif kind == "two_calls":
        second = copy.deepcopy(call)
        second["id"] = call["id"] + "b"
        message["tool_calls"].append(second)
    elif kind == "mixed_content":
        message["content"] = "好的，我来操作。"
    elif kind == "bad_json":
        function["arguments"] = function["arguments"][:-1]
    elif kind == "unavailable_tool":
        offered = offered_names(tools)
        name = next((n for n in PAGE_TOOL_NAMES if n not in offered), "checkout")
        function["name"] = name
        function["arguments"] = json.dumps({argument_key(name) or VALUE_ARGUMENT: value}, ensure_ascii=False)
    elif kind == "wrong_keys":
        function["arguments"] = json.dumps({"q" if action.name == SEARCH_TOOL else "val": value}, ensure_ascii=False)
    elif kind == "click_outside_enum":
        function["name"] = CLICK_TOOL
        function["arguments"] = json.dumps({VALUE_ARGUMENT: OUTSIDE_ENUM_VALUE}, ensure_ascii=False)
    elif kind == "length":
        message["content"] = None
        message["reasoning_content"] = (message.get("reasoning_content") or "") + " …"
        message["tool_calls"] = None
        choice["finish_reason"] = "length"
        usage = out["usage"]
        usage["completion_tokens"] = max_tokens
        usage["total_tokens"] = usage["prompt_tokens"] + max_tokens
    elif kind == "length_with_call":
        choice["finish_reason"] = "length"
    elif kind in ("content_tool_call", "content_tool_call_xml"):
        arguments = json.loads(function["arguments"])
        if kind == "content_tool_call":
            body = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
        else:
            params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
            body = f"<function={function['name']}>\n{params}</function>"
        message["content"] = f"<tool_call>\n{body}\n</tool_call>"
        message["tool_calls"] = None
        choice["finish_reason"] = "stop"
    return out


def _digest(body: Mapping[str, Any]) -> str:
    payload = {"messages": body.get("messages"), "tools": body.get("tools")}
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _install_error_answers(app: FastAPI) -> None:
    """Routing and validation errors in the OpenAI error shape too (FastAPI's default is ``{"detail": ...}``)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error(exc.status_code, str(exc.detail), kind)

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        return _error(400, f"invalid request: {exc}")

    async def library_error(_: Request, exc: Exception) -> JSONResponse:
        return _error(400, str(exc))

    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ShopSimError, library_error)


def _refused_request(messages: Any, tools: Any, model: Any, name: str, *, needs_tools: bool) -> JSONResponse | None:
    """The error answer to a chat request the server cannot take (bad messages or tools, another model), or None."""
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return _error(400, "messages must be a non-empty list of objects")
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return _error(400, "tools must be a list of objects")
    if model not in (None, name):
        return _error(404, f"model {model!r} is not served here (this is {name!r})", "not_found_error")
    if needs_tools and not tools:
        return _error(400, "the policy server needs tools: it only answers with tool calls")
    return None


def _fault_kind(
    kind: Any, body: dict[str, Any], messages: list[Any], digest: str, config: FaultConfig, *, shopper: bool
) -> Any:
    """The fault to inject into this answer, or None: the one asked for (header or ``shopsim_fault``), else the
    fault script's entry for this turn, else the seeded draw; raises ConfigError for one this server cannot give."""
    script = body.get("shopsim_fault_script") or {}
    turn = question_index(messages) if shopper else model_turn(messages)
    if kind is None and isinstance(script, dict):
        kind = script.get(str(turn))
    if kind is None:
        kind = config.draw(digest)
    if kind is not None:
        check_fault(kind)
        if shopper and kind not in SHOPPER_FAULTS:
            raise ConfigError(f"fault {kind!r} is not for the shopper; choose one of {', '.join(SHOPPER_FAULTS)}", code="fault")
        if not shopper and kind == "empty_reply":
            raise ConfigError("fault 'empty_reply' is for the scripted shopper (--policy rule-shopper)", code="fault")
    return kind


def _delivered(completion: dict[str, Any], body: Mapping[str, Any]) -> Any:
    """The completion as asked: one JSON body, or server-sent chunks with ``"stream": true``."""
    if body.get("stream"):
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        return StreamingResponse(sse_events(completion_chunks(completion, include_usage=usage)),
                                 media_type="text/event-stream")
    return completion


def create_policy_app(
    world: ShopWorld, *, policy: str = "heuristic", faults: FaultConfig | None = None, model_name: str | None = None,
) -> FastAPI:
    """The FastAPI app of the policy server (``policy="rule-shopper"``: the scripted shopper)."""
    scripted = ScriptedShopper(world) if policy == SHOPPER_POLICY else None
    chosen = make_policy(policy, world) if scripted is None else None
    name = model_name or f"shopsim-{policy}"
    config = faults or FaultConfig()
    app = FastAPI(title="ShopSimRL policy server", version="1")
    _install_error_answers(app)
    once_lock = threading.Lock()
    once_seen: set[tuple[str, str]] = set()
    app.state.requests = 0
    app.state.last_request = None

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "shopsimrl"}]}

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ready": True, "policy": policy, "model": name, "requests": app.state.requests}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        app.state.requests += 1
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object")
        app.state.last_request = body  # what the client sent (inspected by smoke tests)
        messages, tools = body.get("messages"), body.get("tools") or []
        refused = _refused_request(messages, tools, body.get("model"), name, needs_tools=scripted is None)
        if refused is not None:
            return refused
        messages = cast("list[dict[str, Any]]", messages)  # checked by _refused_request
        digest = _digest(body)
        try:
            kind = _fault_kind(request.headers.get(FAULT_HEADER) or body.get("shopsim_fault"), body, messages, digest,
                               config, shopper=scripted is not None)
        except ConfigError as exc:  # only code "fault" comes from there
            return _error(400, str(exc))
        if kind == "http_500":
            return _error(500, "injected failure", "server_error")
        if kind in ("http_429_once", "http_500_once"):
            with once_lock:
                first = (kind, digest) not in once_seen
                once_seen.add((kind, digest))
            if first:
                status = 429 if kind == "http_429_once" else 500
                return _error(status, "injected transient failure", "rate_limit_error" if status == 429 else "server_error")
            kind = None
        raw_seed = body.get("seed")
        seed: int = raw_seed if isinstance(raw_seed, int) else 0
        if scripted is not None:
            try:
                text = "" if kind == "empty_reply" else scripted.reply(messages, seed=seed)
            except ShopSimError as exc:  # PolicyError, an unknown task
                return _error(422, f"the scripted shopper cannot answer: {exc}", "policy_error")
            return text_completion(text, messages, model=name)
        assert chosen is not None
        task_id = body.get("shopsim_task_id")
        if task_id is not None and not is_task_id(task_id):
            return _error(400, f"shopsim_task_id must be an integer task id, not {task_id!r}")
        if task_id is not None and task_id not in world.catalog.goals:
            return _error(404, f"shopsim_task_id {task_id} is not a task of this catalog", "not_found_error")
        try:
            tools = page_tools(messages, tools)  # a static click(value) without enum: the page's own tools
            action = policy_action(chosen, messages, tools, seed=seed, task_id=task_id)
        except PolicyError as exc:
            return _error(422, f"the {policy} policy cannot act: {exc}", "policy_error")
        completion = action_completion(action, messages, model=name)
        if kind is not None:
            max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 4096
            completion = apply_fault(kind, completion, action, tools, max_tokens=int(max_tokens))
        return _delivered(completion, body)

    return app

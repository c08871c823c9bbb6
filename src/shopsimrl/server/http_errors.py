"""The one mapping from a library error to an HTTP answer: status and a stable machine-readable code.

Every API of the service (the reference ``/api/shop_agent``, ``/v1``, the replay API, the admission guard and
the ``--workers`` front) answers an error as ``{"error": <message>, "code": <code>}`` with the status this
table gives, and the Python clients turn the code (never the message) back into the same class ``ShopEnv``
raises. An error is matched by its most specific class in the table (its method resolution order), so a
subclass without a row of its own answers as its nearest listed base. docs/contract.md lists the table.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

from ..errors import (
    DataIntegrityError,
    DialogueError,
    EpisodeTerminatedError,
    InvalidActionError,
    InvalidRequestError,
    InvalidTaskIdError,
    LeaseError,
    NoActiveEpisodeError,
    PersonaUnavailableError,
    PoolTimeout,
    ReplayError,
    ReplayNotFoundError,
    ResponseTooLong,
    SearchIndexError,
    SessionNotFound,
    ShopperCallError,
    ShopSimError,
    SplitError,
    UnknownTaskError,
    WorkerUnavailableError,
)
from .guard import (
    BodyTooLarge,
    CrossOriginRefused,
    Guard,
    HostNotServed,
    InvalidText,
    NestedTooDeep,
    Preflight,
    Refusal,
    Unauthorized,
    UnsupportedMediaType,
    check_nesting,
    check_text,
    read_limited,
)

_SHOPPER_STAGE = re.compile(r"shopper call failed at shopper_step_(\d{1,6}): ")


class ErrorRow(NamedTuple):
    error: type[ShopSimError]
    status: int
    code: str


ERROR_TABLE: tuple[ErrorRow, ...] = (
    # requests to an environment: the same classes ShopEnv raises in process
    ErrorRow(UnknownTaskError, 404, "unknown_task"),
    ErrorRow(PersonaUnavailableError, 400, "persona_unavailable"),
    ErrorRow(DialogueError, 400, "dialogue_unavailable"),
    ErrorRow(EpisodeTerminatedError, 409, "episode_terminated"),
    ErrorRow(NoActiveEpisodeError, 409, "no_active_episode"),
    ErrorRow(InvalidRequestError, 400, "invalid_request"),
    ErrorRow(InvalidTaskIdError, 400, "invalid_task_id"),
    ErrorRow(InvalidActionError, 400, "invalid_action"),
    ErrorRow(ResponseTooLong, 413, "response_too_long"),
    ErrorRow(ShopperCallError, 502, "shopper_call_failed"),
    ErrorRow(SplitError, 400, "invalid_split"),  # an unknown split name (OpenEnv's task routes, reset by split)  # the LLM shopper's endpoint (message: shopper_step_k)
    # leased slots
    ErrorRow(LeaseError, 409, "stale_lease"),
    ErrorRow(SessionNotFound, 404, "session_not_found"),
    ErrorRow(PoolTimeout, 503, "no_free_slot"),
    ErrorRow(WorkerUnavailableError, 502, "worker_unavailable"),
    # the server's own data (a prepared file altered after it opened, or a search index refused at first use)
    ErrorRow(DataIntegrityError, 503, "data_integrity"),
    ErrorRow(SearchIndexError, 503, "search_unavailable"),
    # the replay API
    ErrorRow(ReplayError, 400, "invalid_replay_request"),
    ErrorRow(ReplayNotFoundError, 404, "replay_not_found"),
    # admission (guard.py), before any library code
    ErrorRow(BodyTooLarge, 413, "body_too_large"),
    ErrorRow(HostNotServed, 421, "host_not_served"),
    ErrorRow(CrossOriginRefused, 403, "cross_origin_refused"),
    ErrorRow(Unauthorized, 401, "unauthorized"),
    ErrorRow(UnsupportedMediaType, 415, "unsupported_media_type"),
    ErrorRow(InvalidText, 400, "invalid_text"),
    ErrorRow(NestedTooDeep, 400, "nested_too_deep"),
    # any other library error: the request could not be served as sent
    ErrorRow(ShopSimError, 400, "bad_request"),
)

# A body that does not parse as JSON: the reference API's plain 400 on /api/shop_agent, on /v1 (FastAPI would say
# 422 "body.1: JSON decode error") and on OpenEnv's task routes alike.
NOT_JSON = "request body must be a JSON object (UTF-8, standard JSON)"


def not_json(errors: Any) -> InvalidRequestError | None:
    """The reference API's error for a body FastAPI could not decode (pydantic's ``json_invalid``), else None."""
    if any(isinstance(err, dict) and err.get("type") == "json_invalid" for err in errors):
        return InvalidRequestError(NOT_JSON)
    return None


# Answers that do not come from a library error (FastAPI's own validation and routing, a bug).
VALIDATION_ERROR = ErrorRow(ShopSimError, 422, "validation_error")  # /v1 body or query fails its model
INTERNAL_ERROR = ErrorRow(ShopSimError, 500, "internal_error")
HTTP_STATUS_CODES = {404: "not_found", 405: "method_not_allowed"}  # routing; any other status: "http_<status>"

_ROW_OF: dict[type[ShopSimError], ErrorRow] = {row.error: row for row in ERROR_TABLE}
ERROR_CLASS_OF_CODE: dict[str, type[ShopSimError]] = {row.code: row.error for row in ERROR_TABLE}


def row_of(exc: ShopSimError | type[ShopSimError]) -> ErrorRow:
    """The table row of an error (or error class): the first class of its MRO that the table lists."""
    kind = exc if isinstance(exc, type) else type(exc)
    for base in kind.__mro__:
        row = _ROW_OF.get(base)
        if row is not None:
            return row
    raise TypeError(f"{kind.__name__} is not a ShopSimError")


def status_of(exc: ShopSimError | type[ShopSimError]) -> int:
    return row_of(exc).status


def error_payload(exc: ShopSimError) -> dict[str, str]:
    """The JSON body of an error answer: the message and the error's code."""
    return {"error": str(exc), "code": row_of(exc).code}


def http_code(status: int) -> str:
    """The code of a routing answer FastAPI gives itself (unknown path, wrong method, ...)."""
    return HTTP_STATUS_CODES.get(status, f"http_{status}")


def rebuild(code: str, message: str) -> ShopSimError | None:
    """The error a service answer names by ``code``, carrying the service's message as it is; None for a code
    this version does not know. The class's own constructor is bypassed: it would format the message again."""
    kind = ERROR_CLASS_OF_CODE.get(code)
    if kind is None:
        return None
    exc = kind.__new__(kind)
    exc.args = (message,)
    if isinstance(exc, ShopperCallError):  # its stage (shopper_step_k) is part of the message the service wrote
        found = _SHOPPER_STAGE.match(message)
        exc.question_index = int(found.group(1)) if found else 0
    return exc


def encode(payload: dict[str, Any]) -> bytes:
    """The JSON bytes of an answer."""
    return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)  # a core dependency: ~5x faster than json


async def send_refusal(send: Any, refusal: Refusal) -> None:
    """Answer a request refused at admission; the connection closes (the body is not read, or not all of it)."""
    body = encode(error_payload(refusal))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *refusal.headers, (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status_of(refusal), "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def admit(guard: Guard, scope: dict[str, Any], receive: Any, send: Any
                ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
    """Admit one HTTP request (every server's edge does it the same way): its CORS headers and its whole body,
    or None when it is already answered (a refusal, a CORS preflight) or its client left before sending it."""
    try:
        cors = guard.admit(scope)
        if isinstance(cors, Preflight):
            await cors.send(send)
            return None
        body = await read_limited(receive, guard.max_body_bytes)
        if body is None:
            return None
        guard.check_type(scope, body, cors)
        check_nesting(body)
        check_text(body)
    except Refusal as refusal:
        await send_refusal(send, refusal)
        return None
    return cors, body

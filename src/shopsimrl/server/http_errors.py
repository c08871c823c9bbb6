"""The one mapping from a library error to an HTTP answer: status and a stable machine-readable code.

Every API of the service (the reference ``/api/shop_agent``, ``/v1``, the replay API, the admission guard and
the ``--workers`` front) answers an error as ``{"error": <message>, "code": <code>}`` with the status these two
tables give, and the Python clients turn the code (never the message) back into the same class and code
``ShopEnv`` raises. An error's own ``code`` is the answer's when its boundary class has a row (``CLASS_STATUS``)
or the code has one (``STATUS_OF_CODE``, which also overrides the class's status); any other library error is a
plain ``bad_request`` 400. docs/contract.md lists every code.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

from ..errors import (
    KIND_OF_CODE,
    AdmissionError,
    EpisodeStateError,
    LeaseError,
    RequestError,
    ServiceError,
    ShopperCallError,
    ShopSimError,
)
from .guard import Guard, Preflight, check_nesting, check_text, read_limited

_SHOPPER_STAGE = re.compile(r"shopper call failed at shopper_step_(\d{1,6}): ")


class ErrorRow(NamedTuple):
    error: type[ShopSimError]
    status: int
    code: str


# A boundary class whose every code is part of the wire contract, and the status its codes answer with.
CLASS_STATUS: dict[type[ShopSimError], int] = {
    RequestError: 400, EpisodeStateError: 409, LeaseError: 409, AdmissionError: 400, ShopperCallError: 502}
# Codes answered with another status than their class's, or sent although their class has no row.
STATUS_OF_CODE: dict[str, int] = {
    "unknown_task": 404, "replay_not_found": 404, "response_too_long": 413,  # requests
    "session_not_found": 404,  # a released or reclaimed /v1 session
    "no_free_slot": 503, "worker_unavailable": 502,  # capacity and the --workers front
    "data_integrity": 503, "search_unavailable": 503, "invalid_split": 400,  # the server's own data
    "body_too_large": 413, "host_not_served": 421, "cross_origin_refused": 403, "unauthorized": 401,
    "unsupported_media_type": 415,  # admission (guard.py), before any library code
}
FALLBACK = ErrorRow(ShopSimError, 400, "bad_request")  # any other library error: not served as sent

# A body that does not parse as JSON: the reference API's plain 400 on /api/shop_agent, on /v1 (FastAPI would say
# 422 "body.1: JSON decode error") and on OpenEnv's task routes alike.
NOT_JSON = "request body must be a JSON object (UTF-8, standard JSON)"


def not_json(errors: Any) -> RequestError | None:
    """The reference API's error for a body FastAPI could not decode (pydantic's ``json_invalid``), else None."""
    if any(isinstance(err, dict) and err.get("type") == "json_invalid" for err in errors):
        return RequestError(NOT_JSON, code="invalid_request")
    return None


# Answers that do not come from a library error (FastAPI's own validation and routing, a bug).
VALIDATION_ERROR = ErrorRow(ShopSimError, 422, "validation_error")  # /v1 body or query fails its model
INTERNAL_ERROR = ErrorRow(ShopSimError, 500, "internal_error")
HTTP_STATUS_CODES = {404: "not_found", 405: "method_not_allowed"}  # routing; any other status: "http_<status>"


def public_rows() -> list[ErrorRow]:
    """Every code a service answer can carry, with its class and status (the table docs/contract.md shows)."""
    rows = [ErrorRow(kind, STATUS_OF_CODE.get(code, CLASS_STATUS.get(kind, 400)), code)
            for code, kind in KIND_OF_CODE.items() if kind in CLASS_STATUS or code in STATUS_OF_CODE]
    return [*sorted(rows, key=lambda row: (row.error.__name__, row.code)), FALLBACK]


def row_of(exc: ShopSimError) -> ErrorRow:
    """The answer to an error: its class, status and code (``FALLBACK`` for a code outside the contract)."""
    kind = KIND_OF_CODE.get(exc.code)
    listed = STATUS_OF_CODE.get(exc.code)
    if kind is None or not isinstance(exc, kind) or (listed is None and kind not in CLASS_STATUS):
        return FALLBACK
    return ErrorRow(kind, listed if listed is not None else CLASS_STATUS[kind], exc.code)


def status_of(exc: ShopSimError) -> int:
    return row_of(exc).status


def error_payload(exc: ShopSimError) -> dict[str, str]:
    """The JSON body of an error answer: the message and the error's code."""
    return {"error": str(exc), "code": row_of(exc).code}


def http_code(status: int) -> str:
    """The code of a routing answer FastAPI gives itself (unknown path, wrong method, ...)."""
    return HTTP_STATUS_CODES.get(status, f"http_{status}")


PUBLIC_CODES = frozenset(row.code for row in public_rows())


def rebuild(code: str, message: str) -> ShopSimError | None:
    """The error a service answer names by ``code``, carrying the service's message as it is; None for a code
    this version does not know. The class's own constructor is bypassed: it would format the message again."""
    if code not in PUBLIC_CODES:
        return None
    kind = KIND_OF_CODE.get(code, ShopSimError) if code != FALLBACK.code else ShopSimError
    exc = kind.__new__(kind)
    exc.args = (message,)
    exc.code = code if code != FALLBACK.code else ShopSimError.default_code
    if isinstance(exc, ShopperCallError):  # its stage (shopper_step_k) is part of the message the service wrote
        found = _SHOPPER_STAGE.match(message)
        exc.question_index = int(found.group(1)) if found else 0
    elif isinstance(exc, AdmissionError):
        exc.headers = []
    elif isinstance(exc, ServiceError):
        exc.status, exc.service_code = STATUS_OF_CODE[code], code
    return exc


def encode(payload: dict[str, Any]) -> bytes:
    """The JSON bytes of an answer."""
    return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)  # a core dependency: ~5x faster than json


async def send_refusal(send: Any, refusal: AdmissionError) -> None:
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
    except AdmissionError as refusal:
        await send_refusal(send, refusal)
        return None
    return cors, body

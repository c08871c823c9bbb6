"""The reference API's actions (docs/contract.md#http-reference-api): the request body's schema for the OpenAPI
document, and ``reference_dispatch``, which answers one raw ``POST /api/shop_agent`` body with (HTTP status,
``{"result": ...}`` or ``{"error": ...}``) through ``EnvService``. ``app`` serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..contract import ACTION_LIMIT, INTERACTION_MODES, SHOPPER_NAMES, SINGLE_TURN, TERMINATION_REASONS
from ..env.shop_env import ShopEnv
from ..errors import RequestError, ShopSimError
from .http_errors import NOT_JSON, error_payload, status_of
from .leases import Lease
from .service import EnvService

# The reference request body, one schema per action, for the OpenAPI schema (the handler parses the body
# itself, so that a non-JSON body is a clear 400 in the reference's own error shape). Unknown fields are
# ignored, as by the reference service, so existing clients keep working.
# Integers are bounded to 64 bits: the JSON decoder (orjson) reads larger ones as floats.
_INT64 = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
_LEASE = {"env_idx": _INT64, "lease_id": {"type": "string", "minLength": 1}}


def _variant(action: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["action", *required],
            "properties": {"action": {"type": "string", "enum": [action]}, **properties}}


REFERENCE_BODY = {
    "required": True,
    "content": {"application/json": {"schema": {"oneOf": [
        _variant("reset", ["idx"], idx=_INT64, if_persona={"type": ["boolean", "null"]},
                 include_private_goal={"type": "boolean"},
                 interaction_mode={"type": "string", "enum": list(INTERACTION_MODES)},
                 shopper={"type": ["string", "null"], "enum": [*SHOPPER_NAMES, None]},
                 shopper_seed={"type": ["integer", "null"], "minimum": -(2**63), "maximum": 2**63 - 1},
                 wait_timeout={"type": "number", "minimum": 0, "maximum": 86_400}),
        _variant("interact", ["env_idx", "lease_id", "response"], **_LEASE, response={"type": "string"},
                 step_index={"type": "integer", "minimum": 1, "maximum": 2**63 - 1}),
        _variant("terminate", ["env_idx", "lease_id"], **_LEASE,
                 termination_reason={"type": "string", "enum": list(TERMINATION_REASONS)}),
        _variant("release_one", ["env_idx", "lease_id"], **_LEASE),
        _variant("dialogue_transcript", ["env_idx", "lease_id"], **_LEASE),
        _variant("release_all", []),
    ]}}},
}


def error_answer(exc: ShopSimError) -> tuple[int, dict[str, str]]:
    """A library error's status and body, from the table in http_errors.py."""
    return status_of(exc), error_payload(exc)


def reference_dispatch(service: EnvService) -> Callable[[bytes], Awaitable[tuple[int, dict[str, Any]]]]:
    """The answer to one reference request body, with the action handlers over ``service``."""

    async def dispatch(raw: bytes) -> tuple[int, dict[str, Any]]:
        """One reference request: (HTTP status, ``{"result": ...}`` or ``{"error": ...}``)."""
        try:
            body = decode(raw or b"null")
        except ValueError:  # json.JSONDecodeError, orjson.JSONDecodeError and UnicodeDecodeError are ValueErrors
            return error_answer(RequestError(NOT_JSON, code="invalid_request"))
        if not isinstance(body, dict):
            return error_answer(RequestError("request body must be a JSON object", code="invalid_request"))
        action = body.get("action")
        handler = handlers.get(action) if isinstance(action, str) else None
        if handler is None:
            return error_answer(RequestError(f"unsupported action: {action!r}", code="invalid_request"))
        try:
            return 200, {"result": await handler(body)}
        except ShopSimError as exc:  # every check on a request path raises a typed error (tests/test_errors.py)
            return error_answer(exc)

    def _lease(body: dict[str, Any], action: str) -> Lease[ShopEnv]:
        slot, lease_id = json_int(body.get("env_idx")), body.get("lease_id")
        if slot is None or not isinstance(lease_id, str) or not lease_id:
            raise RequestError(f"{action} requires a valid env_idx and lease_id", code="invalid_request")
        return service.lease(slot, lease_id)

    async def _reset(body: dict[str, Any]) -> dict[str, Any]:
        if "env_idx" in body:
            raise RequestError("reset must not include env_idx; the server assigns a slot", code="invalid_request")
        if "idx" not in body:
            raise RequestError("reset action requires idx parameter", code="invalid_request")
        idx = json_int(body["idx"])
        lease, payload = await service.reset(
            body["idx"] if idx is None else idx, persona=body.get("if_persona", False),
            interaction_mode=body.get("interaction_mode", SINGLE_TURN),
            include_private_goal=body.get("include_private_goal", False), wait_timeout=body.get("wait_timeout"),
            shopper=body.get("shopper"), shopper_seed=_seed(body.get("shopper_seed")),
        )
        payload.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return payload

    async def _interact(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "interact")
        result = await service.step_async(lease, body.get("response"), body.get("step_index"))
        result.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return result

    async def _terminate(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "terminate")
        result = await service.terminate_async(lease, body.get("termination_reason", ACTION_LIMIT))
        result.update(env_idx=lease.slot, lease_id=lease.lease_id)
        return result

    async def _transcript(body: dict[str, Any]) -> dict[str, Any]:
        return service.dialogue_transcript(_lease(body, "dialogue_transcript"))

    async def _release_one(body: dict[str, Any]) -> dict[str, Any]:
        lease = _lease(body, "release_one")
        service.release(lease)
        return {"message": f"Environment {lease.slot} has been released"}

    async def _release_all(body: dict[str, Any]) -> dict[str, Any]:
        service.release_all()
        return {"message": "All environments have been initialized"}

    handlers = {
        "reset": _reset, "interact": _interact, "terminate": _terminate,
        "release_one": _release_one, "release_all": _release_all, "dialogue_transcript": _transcript,
    }

    return dispatch


def _seed(value: Any) -> Any:
    """``shopper_seed`` as an int where JSON Schema counts it one (``7.0``); anything else is left for the
    service to refuse."""
    as_int = json_int(value)
    return value if as_int is None else as_int


def json_int(value: Any) -> int | None:
    """An integer as JSON Schema counts one (``7`` or ``7.0``, not ``true``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return None


def decode(raw: bytes) -> Any:
    return orjson.loads(raw)

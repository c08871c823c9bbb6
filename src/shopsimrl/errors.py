"""Typed errors by boundary: a dozen classes, each instance with a stable ``code`` saying what went wrong.

Why by boundary, not by feature: a caller decides what to do by *who* failed (its own request, the data, the
episode's state, the shopper or model endpoint, a trainer adapter, the service), and the ``code`` keeps the
detail (``unknown_task``, ``data_integrity``, ...) for messages, traces and the HTTP answer. Every class lists
the codes it may carry (``codes``), so a code names one class (``KIND_OF_CODE``) and ``escaped`` is the one
place that says what an exception leaving a boundary is. Builtin bases are kept where callers catch them:
requests and data are ``ValueError``, episode state is ``RuntimeError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar


class ShopSimError(Exception):
    """Base class of every error ShopSimRL raises on purpose; ``code`` is one of the class's ``codes``."""

    codes: ClassVar[frozenset[str]] = frozenset({"error"})
    default_code: ClassVar[str] = "error"

    def __init__(self, *args: object, code: str | None = None) -> None:
        super().__init__(*args)
        chosen = self.default_code if code is None else code
        if chosen not in self.codes:
            raise TypeError(f"{type(self).__name__} has no error code {chosen!r}")
        self.code = chosen


def _codes(*names: str) -> frozenset[str]:
    return frozenset(names)


class RequestError(ShopSimError, ValueError):
    """A request or argument of the wrong type, outside its range, or naming nothing (a task id, an interaction
    mode, a shopper, a replay run): the same class and code in process and behind the HTTP service."""

    codes = _codes("invalid_request", "invalid_task_id", "invalid_action", "response_too_long", "unknown_task",
                   "persona_unavailable", "dialogue_unavailable", "invalid_replay_request", "replay_not_found")
    default_code = "invalid_request"
    task_id: object = None  # the task of an ``unknown_task`` or ``persona_unavailable`` error


class EpisodeStateError(ShopSimError, RuntimeError):
    """A call the episode's state does not allow: a step or terminate after the end, or before the first reset."""

    codes = _codes("episode_terminated", "no_active_episode")
    default_code = "episode_terminated"


class DataError(ShopSimError, ValueError):
    """Data that cannot be built, read or trusted: an archive, generator settings, a data directory or one of its
    files (integrity), a split, the search index, a goal, an observation, a skill bank, stored tiers."""

    codes = _codes("archive", "generator_config", "dataset_build", "data_directory", "data_integrity",
                   "invalid_split", "search_unavailable", "data_file", "invalid_goal", "invalid_selection",
                   "observation", "difficulty", "vocabulary", "skill_bank", "response_format")
    default_code = "data_directory"


class ShopperCallError(ShopSimError):
    """The LLM shopper's endpoint failed to answer question ``question_index`` (0: the opening).

    The episode fails technically at stage ``shopper_step_<k>``; no reply is ever made up in its place.
    """

    codes = _codes("shopper_call_failed")
    default_code = "shopper_call_failed"

    def __init__(self, question_index: int, message: str) -> None:
        super().__init__(f"shopper call failed at {shopper_stage(question_index)}: {message}")
        self.question_index = question_index

    @property
    def stage(self) -> str:
        return shopper_stage(self.question_index)


def shopper_stage(question_index: int) -> str:
    """The runtime stage of a failed shopper call: ``shopper_step_0`` is the opening, ``k`` the k-th question."""
    return f"shopper_step_{question_index}"


class ModelCallError(ShopSimError):
    """A model endpoint failed: a non-retryable HTTP status or still failing after the retries, or an inference
    server's answer without token ids or log-probs."""

    codes = _codes("model_request", "server_generate")
    default_code = "model_request"


class PolicyError(ShopSimError):
    """A policy cannot act on this context (no tool offered, an unknown task, malformed messages), or tools a
    constrained decoder cannot handle, or a conversation the policy server's scripted shopper cannot answer."""

    codes = _codes("policy", "grammar", "shopper_script")
    default_code = "policy"


class AdapterError(ShopSimError):
    """A trainer adapter (TRL, verl, slime) cannot run this: a missing extra, a setting it refuses, a task row that is
    not one (``train/row_codec.py``), a template failure, a run it cannot export."""

    codes = _codes("adapter", "sft_export")
    default_code = "adapter"


class RolloutError(ShopSimError):
    """A technical failure of one rollout (bad generation output, a chat template that cannot continue it, a group
    that breaks a GRPO invariant, a page without a tool, slime's abort): the episode is unscored."""

    codes = _codes("rollout", "chat_template", "template_unreadable", "group", "slime_aborted", "no_tool_offered")
    default_code = "rollout"


class AdmissionError(ShopSimError):
    """A request the server does not admit, before any library code runs (body size, Host, Origin, key, media
    type, text, nesting), or no slot free within the wait timeout; ``headers`` are added to the answer."""

    codes = _codes("body_too_large", "host_not_served", "cross_origin_refused", "unauthorized",
                   "unsupported_media_type", "invalid_text", "nested_too_deep", "no_free_slot")
    default_code = "body_too_large"

    def __init__(self, message: str, headers: Iterable[tuple[bytes, bytes]] = (), *, code: str | None = None
                 ) -> None:
        super().__init__(message, code=code)
        self.headers = list(headers)


class LeaseError(ShopSimError):
    """A stale, unknown or mismatched lease (released, reclaimed when idle, or never issued), or a ``/v1``
    session id that names no live session (``session_not_found``)."""

    codes = _codes("stale_lease", "session_not_found")
    default_code = "stale_lease"


class ServiceError(ShopSimError):
    """A failure of the HTTP transport, not of the request: no connection, a 5xx answer, a body that is not the
    service's JSON, an error code this client does not know, or a worker process of ``serve --workers`` that does
    not answer. ``status`` is the HTTP status (0: no answer), ``service_code`` the service's code when it sent one."""

    codes = _codes("service", "worker_unavailable")
    default_code = "service"

    def __init__(self, status: int, message: str, service_code: str | None = None, *, code: str | None = None
                 ) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message, code=code)
        self.status = status
        self.service_code = service_code


class ConfigError(ShopSimError):
    """Settings that cannot work: an evaluation plan, a run directory for another plan, two runs that cannot be
    compared, ``--ray`` without Ray, a training recipe, a scenario, a test switch of the policy server."""

    codes = _codes("plan", "run_dir", "comparison", "ray_unavailable", "recipe", "scenario", "fault")
    default_code = "plan"


# The boundary classes and who is at fault when one escapes (docs/python.md lists them).
BOUNDARIES: dict[type[ShopSimError], str] = {
    RequestError: "the caller's request or argument",
    EpisodeStateError: "a call the episode's state does not allow",
    DataError: "the data (archive, data directory, index, task files)",
    ShopperCallError: "the shopper (LLM endpoint or scripted backend)",
    ModelCallError: "the model endpoint",
    PolicyError: "the policy on this context",
    AdapterError: "a trainer adapter",
    RolloutError: "one rollout (technical failure, unscored)",
    AdmissionError: "the server's admission (request refused, or no free slot)",
    LeaseError: "the service's lease or session",
    ServiceError: "the HTTP transport",
    ConfigError: "the settings",
}

_KINDS: tuple[type[ShopSimError], ...] = (ShopSimError, *BOUNDARIES)
KIND_OF_CODE: dict[str, type[ShopSimError]] = {code: kind for kind in _KINDS for code in kind.codes}


def escaped(exc: BaseException) -> tuple[str, str | None]:
    """What an exception leaving a boundary is: its boundary class's name and its code (None: not one of ours)."""
    if isinstance(exc, ShopSimError):
        for kind in type(exc).__mro__:
            if kind in BOUNDARIES or kind is ShopSimError:
                return kind.__name__, exc.code
    return type(exc).__name__, None


# ---------------------------------------------------------------- constructors of repeated cases
def unknown_task(task_id: object) -> RequestError:
    """A task id that is not an active task of the loaded catalog."""
    exc = RequestError(f"unknown or inactive task_id {task_id}", code="unknown_task")
    exc.task_id = task_id
    return exc


def persona_unavailable(task_id: object) -> RequestError:
    """A persona-mode reset of a standard task (one without a user persona)."""
    exc = RequestError(f"task {task_id} is a standard task without a persona: reset it in standard mode "
                       f"(persona=False, if_persona false) or leave the mode unset to use the task's own mode",
                       code="persona_unavailable")
    exc.task_id = task_id
    return exc

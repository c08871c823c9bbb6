"""Typed errors shared across the package; every user-facing failure is one of these."""


class ShopSimError(Exception):
    """Base class of every error ShopSimRL raises on purpose."""


class ArchiveError(ShopSimError, ValueError):
    """An archive cannot be read or fails validation (names record index, ASIN and field)."""


class GeneratorConfigError(ShopSimError, ValueError):
    """Generator settings that cannot describe a catalog (counts out of range, too few two-axis leaves)."""


class DatasetBuildError(ShopSimError):
    """The data-preparation pipeline cannot complete (bad inputs, refusing to overwrite, ...)."""


class DataDirectoryError(DatasetBuildError, ValueError):
    """A data directory that cannot be opened as it is (not prepared, or prepared by an older version)."""


class DataIntegrityError(DataDirectoryError):
    """A prepared file that is missing or differs from its size or SHA-256 in ``manifest.json`` (named)."""


class SplitError(ShopSimError, ValueError):
    """A split cannot be built or read (e.g. the catalog is too small for the requested sizes)."""


class SearchIndexError(ShopSimError):
    """The search index is missing, corrupt or does not match the catalog it is opened for."""


class UnknownTaskError(ShopSimError, KeyError):
    """A task id that is not an active task of the loaded catalog."""

    def __init__(self, task_id: object) -> None:
        super().__init__(f"unknown or inactive task_id {task_id}")
        self.task_id = task_id

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0])


class InvalidGoalError(ShopSimError, ValueError):
    """A goal that cannot be scored (missing or mistyped fields): it must never silently score partially."""


class InvalidSelectionError(ShopSimError, ValueError):
    """An option selection that is not ``{axis: value}`` strings (e.g. the goal's option list): it must never
    score r_option 0 silently."""


class EpisodeTerminatedError(ShopSimError, RuntimeError):
    """A step or terminate call on an episode that has already ended."""


class ObservationError(ShopSimError, ValueError):
    """A structured observation that the renderer refuses (wrong version, hidden keys, ...)."""


class DataFileError(ShopSimError, ValueError):
    """A JSON file the package reads (a data or run directory's manifest, splits, ...) that is missing, not a
    regular file, not UTF-8, not valid JSON or nested too deeply; the message names the file."""


class PersonaUnavailableError(ShopSimError, ValueError):
    """A persona-mode reset of a standard task (one without a user persona)."""

    def __init__(self, task_id: object) -> None:
        super().__init__(
            f"task {task_id} is a standard task without a persona: reset it in standard mode "
            f"(persona=False, if_persona false) or leave the mode unset to use the task's own mode"
        )
        self.task_id = task_id


class DialogueError(ShopSimError, ValueError):
    """A dialogue-mode request that cannot be served (unknown or unavailable shopper, bad shopper settings)."""


class ShopperCallError(ShopSimError):
    """The LLM shopper's endpoint failed to answer question ``question_index`` (0: the opening).

    The episode fails technically at stage ``shopper_step_<k>``; no reply is ever made up in its place.
    """

    def __init__(self, question_index: int, message: str) -> None:
        super().__init__(f"shopper call failed at {shopper_stage(question_index)}: {message}")
        self.question_index = question_index

    @property
    def stage(self) -> str:
        return shopper_stage(self.question_index)


class NoToolOfferedError(ShopSimError):
    """An open episode on a page that offers no tool: the episode loop cannot continue (a broken environment)."""


def shopper_stage(question_index: int) -> str:
    """The runtime stage of a failed shopper call: ``shopper_step_0`` is the opening, ``k`` the k-th question."""
    return f"shopper_step_{question_index}"


# ---------------------------------------------------------------- requests to an environment (any path)
class InvalidRequestError(ShopSimError, ValueError):
    """A reset, step or terminate argument of the wrong type or outside its range (task id, interaction mode,
    termination reason, wait timeout, ...): the same class in process and behind the HTTP service."""


class InvalidTaskIdError(InvalidRequestError):
    """A task id that is not an integer (a bool is not one either): the request is malformed."""


class InvalidActionError(InvalidRequestError):
    """A step action that is not text at all (a canonical action string or model text is required); a string
    that does not parse is not an error but an ``action_feedback`` with an error code."""


class ResponseTooLong(InvalidActionError):
    """A step's ``response``/``action`` text longer than the server's ``--max-response-chars`` limit."""


class NoActiveEpisodeError(ShopSimError, RuntimeError):
    """A call that needs an episode (step, terminate, tools, observation_state) before the first reset."""


# ---------------------------------------------------------------- the service's leased slots
class LeaseError(ShopSimError):
    """A stale, unknown or mismatched lease (released, reclaimed when idle, or never issued)."""


class SessionNotFound(LeaseError):
    """No live session has this id (the ``/v1`` API names a session by its lease id: the resource is gone)."""


class PoolTimeout(ShopSimError):
    """No slot became free within the reset's wait timeout."""


class WorkerUnavailableError(ShopSimError):
    """The front process of ``serve --workers`` could not get an answer from a worker process."""


class ReplayError(ShopSimError):
    """A replay request that cannot be served because it is malformed (bad run name, file too large, ...)."""


class ReplayNotFoundError(ReplayError):
    """A replay request for a run or an episode that does not exist."""


class ServiceError(ShopSimError):
    """A failure of the HTTP transport, not of the request: no connection, a 5xx answer, a body that is not the
    service's JSON, or an error code this client does not know. ``status`` is the HTTP status (0: no answer),
    ``code`` the service's error code when it sent one."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.code = code

# ---------------------------------------------------------------- agents, evaluation and training (Python API, CLI)
class PolicyError(ShopSimError):
    """A policy cannot act on this context (no tool offered, an unknown task, malformed messages)."""


class ModelRequestError(ShopSimError):
    """The model endpoint failed (non-retryable HTTP status, or still failing after the retries)."""


class SkillBankError(ShopSimError):
    """A skill-bank file that cannot be used (missing, not JSON, wrong schema, malformed skill)."""


class PlanError(ShopSimError):
    """Settings that do not make a valid evaluation plan."""


class RunDirError(ShopSimError):
    """A run directory that cannot be used for this plan (another plan, unreadable manifest)."""


class ComparisonError(ShopSimError):
    """Two runs that cannot be compared (different tasks, environment or catalog; missing episodes)."""


class RayUnavailable(ShopSimError):
    """``--ray`` was asked for but Ray is not installed or the cluster cannot be reached."""


class RolloutError(ShopSimError):
    """A technical failure of one rollout (bad generation output, env failure): the episode is unscored."""


class ChatTemplateError(RolloutError):
    """The chat template cannot continue the episode's token sequence (it rewrote an earlier turn)."""


class GroupError(ShopSimError):
    """A group that breaks a GRPO invariant (mixed contexts, siblings of one rollout that disagree)."""


class ServerGenerateError(ShopSimError):
    """The inference server's answer lacks token ids or log-probs, or the request failed."""


class SftExportError(ShopSimError):
    """A run directory that cannot be exported, or an output the installed packages cannot write."""


class RecipeError(ShopSimError):
    """A training recipe setting that cannot work (the CPU language-model recipe, ``train policy``), or a stage
    whose input is missing."""


class GrammarError(ShopSimError):
    """Tools or a tokenizer that constrained tool-call decoding cannot handle (a non-string argument, no valid
    call, a tokenizer that is not byte-level BPE), or a token outside the grammar."""


class AdapterError(ShopSimError):
    """A trainer adapter (TRL, verl, slime) cannot run this: a missing extra, a setting it refuses, a task row that is
    not one (``train/row_codec.py``), a template failure."""


class TemplateUnreadableError(ChatTemplateError):
    """The chat template cannot carry the episode's tool calls (none rendered, or unreadable)."""


class ResponseFormatError(ShopSimError, ValueError):
    """Model text that claims a chat template's tool-call format but breaks it (``train.tool_formats``)."""


class ScenarioError(ShopSimError):
    """An unknown scenario name or settings the scenarios cannot take."""


class DifficultyError(ShopSimError, ValueError):
    """An unknown tier name, or tiers that are missing or stale for the data directory."""

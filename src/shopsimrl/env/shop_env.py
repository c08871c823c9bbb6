"""The in-process environment: ``ShopWorld`` (shared, read-only) and ``ShopEnv`` (one session).

A process opens a data directory once as a ``ShopWorld`` (catalog, search index, per-product page data,
an exact search cache) and creates any number of ``ShopEnv`` sessions over it. The same interface is
implemented by the HTTP client, so runtimes can use either.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from ..bounded_cache import PRODUCT_VIEW_BYTES, BoundedMemo, text_bytes
from ..catalog.goals import strip_reasoning
from ..catalog.store import Catalog
from ..contract import (
    ACTION_LIMIT,
    MULTI_TURN,
    SINGLE_TURN,
    started_message,
    task_mode,
    visible_instruction,
)
from ..errors import EpisodeStateError, persona_unavailable
from ..search import search_tokens
from ..versions import DIALOGUE_OBSERVATION_VERSION, DIALOGUE_TOOL_VERSION, ENVIRONMENT_VERSION, SEARCH_TOP_K
from ._dialogue_session import DialogueSession
from ._product_view import ProductView
from ._session import ShopSession
from .interface import ResetResult, StepResult, TerminateResult
from .requests import (
    MAX_RESPONSE_CHARS,
    check_reset,
    check_response,
    check_termination_reason,
    check_transcript_access,
)
from .shoppers import Shopper, ShopperRegistry
from .tools import tools_for_state

VIEW_CACHE_SIZE = 65536


def _view_bytes(args: tuple[object, ...], view: ProductView) -> int:
    """A view's memory, estimated from its summary's text (its product, once loaded, is about thrice that)."""
    return 4 * sum(text_bytes(str(value)) for value in view.summary.values()) + 1024


class ShopWorld:
    """Catalog + search + page data, loaded once per process and shared by every session (thread-safe reads)."""

    _shared: ClassVar[dict[Path, ShopWorld]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, catalog: Catalog) -> None:
        """Sessions read products and goals lazily from the catalog; only the search index is opened here."""
        self.catalog = catalog
        # page data by ASIN, within a byte budget: a 1.2M-product catalog's views would not fit in memory
        self._views = BoundedMemo(self._new_view, maxsize=VIEW_CACHE_SIZE, max_bytes=PRODUCT_VIEW_BYTES,
                                  size_of=_view_bytes)
        index = catalog.search_index
        # prepare checks that every hit is a catalog product; only an index built elsewhere needs the filter
        known = None if catalog.index_covers_products else catalog.products_by_asin

        def search(query: str) -> tuple[str, ...]:
            """The result ASINs of ``query``; the index's own cache (keyed by the query's tokens) is the only one."""
            asins = index.result_asins(search_tokens(query), SEARCH_TOP_K)
            return asins if known is None else tuple(asin for asin in asins if asin in known)

        self.search = search

    @classmethod
    def from_data_dir(cls, root: str | os.PathLike[str]) -> ShopWorld:
        """A new world over a prepared data directory (prefer :meth:`shared`, which opens each directory once).

        Args:
            root: a ``shopsimrl data prepare`` directory.

        Returns:
            The world; the catalog is checked against its manifest first (``CatalogError`` when it does not match).
        """
        return cls(Catalog.from_data_dir(root))

    @classmethod
    def shared(cls, root: str | os.PathLike[str]) -> ShopWorld:
        """The process-wide world for a data directory (opened on first use).

        Args:
            root: a ``shopsimrl data prepare`` directory; paths naming the same directory share one world.

        Returns:
            The same ``ShopWorld`` object on every call for that directory.
        """
        key = Path(root).resolve()
        with cls._shared_lock:
            world = cls._shared.get(key)
            if world is None:
                world = cls._shared[key] = cls.from_data_dir(key)
            return world

    def view(self, asin: str) -> ProductView:
        """The page data of one product, built once and cached for every session of this world.

        Args:
            asin: a catalog product's ASIN (``KeyError`` otherwise).

        Returns:
            The product's immutable page view.
        """
        return self._views(asin)

    def _new_view(self, asin: str) -> ProductView:
        products = self.catalog.products_by_asin
        return ProductView.listed(asin, self.catalog.product_record(asin), partial(products.__getitem__, asin))

    def new_env(self, *, shoppers: ShopperRegistry | None = None, max_response_chars: int = MAX_RESPONSE_CHARS
                ) -> ShopEnv:
        """A new session over this world.

        Args:
            shoppers: the shoppers ``reset(..., shopper=...)`` may start (``shopper_registry()``; None: no dialogue).
            max_response_chars: the longest action text a step accepts.

        Returns:
            A ``ShopEnv`` with no episode yet (call ``reset``).
        """
        return ShopEnv(self, shoppers=shoppers, max_response_chars=max_response_chars)


def resolve_persona_mode(task_id: int, goal: Mapping[str, Any], persona: bool | None) -> bool:
    """The mode a reset runs in: None → persona iff the task has one; True on a standard task is an error."""
    has_persona = bool(goal.get("user_persona"))
    if persona is None:
        return has_persona
    if persona and not has_persona:
        raise persona_unavailable(task_id)
    return bool(persona)


def _reset_payload(task_id: int, session: ShopSession, goal: Mapping[str, Any], persona: bool,
                   include_private_goal: bool, shopper: Shopper | None, opening: str) -> dict[str, Any]:
    """The reset result (docs/contract.md#reset) of a new session: the visible task, the first page, the modes and
    versions; the shopper's fields in dialogue mode; the private goal when asked for."""
    observation, state = session.observe()
    payload: dict[str, Any] = {
        "task_instruction": visible_instruction(goal, persona) if shopper is None else "",
        "observation": observation,
        "message": started_message(task_id),
        "idx": task_id,
        "task_mode": task_mode(persona),
        "interaction_mode": session.interaction_mode,
        "environment_version": ENVIRONMENT_VERSION,
        "observation_state": state,
        "user_persona": strip_reasoning(goal.get("user_persona")) if persona else {},
    }
    if shopper is not None:
        payload["shopper"] = shopper.name
        payload["shopper_version"] = shopper.version
        payload["shopper_opening"] = opening
        payload["dialogue_version"] = DIALOGUE_OBSERVATION_VERSION
        payload["tool_version"] = DIALOGUE_TOOL_VERSION
    if include_private_goal:
        payload["private_task_instruction"] = goal["instruction_text"]
        payload["goal_options"] = list(goal["goal_options"])
        payload["reason_key"] = goal.get("reason_key")
        if shopper is not None:
            payload["shopper_slots"] = [slot.name for slot in shopper.slots]
    return payload


class ShopEnv:
    """One shopping session: ``reset`` a task, then ``step`` canonical actions until ``done``."""

    def __init__(
        self, world: ShopWorld, *, shoppers: ShopperRegistry | None = None,
        max_response_chars: int = MAX_RESPONSE_CHARS,
    ) -> None:
        """``shoppers``: the shoppers ``reset(..., shopper=...)`` may start (``shopsimrl.dialogue.registry.
        shopper_registry(llm=...)``; None: dialogue mode is refused); ``max_response_chars``: the longest action
        text ``step`` accepts (the service passes its own cap)."""
        self.world = world
        self.max_response_chars = max_response_chars
        self._session: ShopSession | None = None
        self._private = False  # the last reset's include_private_goal (the transcript's access rule)
        self._persona = False
        self.shoppers = shoppers

    @classmethod
    def from_data_dir(
        cls, root: str | os.PathLike[str], *, shoppers: ShopperRegistry | None = None
    ) -> ShopEnv:
        """A session over the process-wide shared world of ``root`` (a ``shopsimrl data prepare`` directory)."""
        return cls(ShopWorld.shared(root), shoppers=shoppers)

    # ------------------------------------------------------------------ API
    def reset(
        self,
        task_id: int,
        persona: bool | None = None,
        interaction_mode: str = SINGLE_TURN,
        *,
        include_private_goal: bool = False,
        session_id: str | None = None,
        shopper: str | None = None,
        shopper_config: object = None,
        shopper_seed: int | None = None,
    ) -> ResetResult:
        """Start task ``task_id``; ``persona`` True/False forces the mode, None takes the task's own mode.

        A persona reset of a standard task raises :class:`RequestError` (`persona_unavailable`) (it used to return
        ``task_mode: "persona"`` with an empty persona and the full instruction).

        ``shopper="rule"`` starts a dialogue episode (always ``multi_turn``): ``task_instruction`` is withheld
        (``""``), ``shopper_opening`` carries the shopper's first message, and ``ask_user`` is offered until
        ``shopper_config.max_questions`` questions have been answered. None (the default) is the reference
        behaviour, byte for byte. ``shopper="llm"`` asks the endpoint this env's ``shoppers`` hold for
        the opening and every reply; a failed call raises :class:`ShopperCallError`. ``shopper_seed`` replaces
        ``shopper_config.sample_seed`` (the LLM shopper sends it as the request seed).

        Args:
            task_id: an active task of the loaded catalog.
            persona: True for persona mode, False for standard mode, None for the task's own mode.
            interaction_mode: ``single_turn`` (30 actions) or ``multi_turn`` (40); a shopper implies ``multi_turn``.
            include_private_goal: add the private instruction, goal options and reason key (never for an agent).
            session_id: an id recorded in the session (the HTTP service passes its lease id).
            shopper: None (no dialogue), ``"rule"`` or ``"llm"``.
            shopper_config: question limit, sample seed and noise of the shopper.
            shopper_seed: the episode seed for the shopper, a 64-bit integer (replaces
                ``shopper_config.sample_seed``); it needs a shopper.

        Returns:
            The reset result (docs/contract.md#reset): ``task_instruction``, ``observation``,
            ``observation_state``, ``user_persona``, modes and versions; in dialogue mode also the shopper fields.

        Raises:
            RequestError (unknown_task, invalid_task_id, invalid_request, persona_unavailable, dialogue_unavailable),
            ShopperCallError (the LLM shopper's opening failed).
        """
        offered = self.shoppers.names() if self.shoppers is not None else ()
        check_reset(task_id, persona=persona, interaction_mode=interaction_mode,
                    include_private_goal=include_private_goal, shopper=shopper, shopper_seed=shopper_seed,
                    offered=offered)
        settings = self.shoppers.settings(shopper_config, shopper_seed) if self.shoppers is not None else None
        goal = self.world.catalog.goal(task_id)
        persona = resolve_persona_mode(task_id, goal, persona)
        chat_shopper: Shopper | None = None
        if shopper is not None:
            assert self.shoppers is not None  # check_reset refused a shopper the env was not given
            interaction_mode = MULTI_TURN
            product = self.world.catalog.products_by_asin.get(goal["asin"])
            chat_shopper = self.shoppers.build(shopper, goal, product.raw if product is not None else None, settings)
        opening = chat_shopper.opening() if chat_shopper is not None else ""  # a failure leaves the env as it was
        session = self._new_session(goal, interaction_mode, session_id, chat_shopper)
        self._session = session
        self._private = include_private_goal
        payload = _reset_payload(task_id, session, goal, persona, include_private_goal, chat_shopper, opening)
        return cast(ResetResult, payload)

    def _new_session(self, goal: Mapping[str, Any], interaction_mode: str, session_id: str | None,
                     shopper: Shopper | None) -> ShopSession:
        kind: Callable[..., ShopSession] = ShopSession if shopper is None else partial(DialogueSession, shopper=shopper)
        return kind(goal=goal, search=self.world.search, view=self.world.view, interaction_mode=interaction_mode,
                    session_id=session_id)

    def step(self, action: str) -> StepResult:
        """Apply ``action``: a canonical ``search[...]`` / ``click[...]`` string, or a model's whole answer whose
        one ``Action:`` line holds it (read the same way on every path: docs/contract.md#model-text).

        Args:
            action: the action text; a string that does not parse is not an error but invalid ``action_feedback``.

        Returns:
            The step result (docs/contract.md#step-effects): ``observation``, ``observation_state``, ``reward``,
            ``done``, ``action_feedback``, ``reward_detail`` and counters.

        Raises:
            EpisodeStateError before a reset, EpisodeStateError after the end, RequestError when
            ``action`` is not a string, RequestError beyond ``max_response_chars`` (65,536 by default, as
            behind the service), ShopperCallError when the LLM shopper fails to answer a question.
        """
        session = self._require_session()
        return cast(StepResult, session.step(check_response(action, self.max_response_chars)))

    def terminate(self, reason: str = ACTION_LIMIT) -> TerminateResult:
        """End the episode with zero reward, shaped as the reference's ``terminate`` result (docs/contract.md#http-reference-api): no
        ``action_feedback`` (no action was taken) and the message ``Episode terminated: <reason>``.

        Args:
            reason: ``action_limit`` or ``generation_length``.

        Returns:
            The terminal result with reward 0 and ``done`` True.

        Raises:
            EpisodeStateError, EpisodeStateError (already ended), RequestError (unknown reason).
        """
        session = self._require_session()
        return cast(TerminateResult, session.terminate(check_termination_reason(reason)))

    def tools(self) -> list[dict[str, Any]]:
        """The function tools the current page offers (docs/contract.md#tools): ``search`` where a search box is
        shown, ``click`` with the page's clickable values as its enum, ``ask_user`` in dialogue mode while offered.

        Returns:
            OpenAI-style tool schemas, rebuilt from :meth:`observation_state` on every call.
        """
        return tools_for_state(self._require_session().observation_state())

    def observation_state(self) -> dict[str, Any]:
        """The structured page (docs/contract.md#observation-state).

        Returns:
            A fresh dict on every call, safe to mutate.

        Raises:
            EpisodeStateError: before the first reset.
        """
        return self._require_session().observation_state()

    def observation(self) -> str:
        """The current page as the model reads it.

        Returns:
            The observation text (docs/contract.md#observation-text), the same as the last result's ``observation``.

        Raises:
            EpisodeStateError: before the first reset.
        """
        return self._require_session().observe()[0]

    def dialogue_transcript(self) -> list[dict[str, Any]] | None:
        """The questions, replies, matched slots and noise events so far (None outside dialogue mode).

        Private (it names slots): for traces and metrics, never for the agent, so it is available once the
        episode is over, or throughout an episode reset with ``include_private_goal`` (the same rule behind the
        service: ``ShopClient.dialogue_transcript``, ``GET /v1/sessions/{id}/dialogue_transcript``).

        Returns:
            One fresh dict per question, in order; None when the episode has no shopper.

        Raises:
            EpisodeStateError before the first reset; RequestError while a non-private episode runs.
        """
        session = self._require_session()
        if not isinstance(session, DialogueSession):
            return None
        check_transcript_access(session.done, self._private)
        return [dict(entry) for entry in session.shopper.transcript]

    @property
    def done(self) -> bool:
        """True once the episode has ended (a purchase, the action limit or ``terminate``)."""
        return self._session is not None and self._session.done

    @property
    def shopper_name(self) -> str | None:
        """The shopper of the current dialogue episode (``rule`` / ``llm``), None outside dialogue mode."""
        session = self._session
        return session.shopper.name if isinstance(session, DialogueSession) else None

    @property
    def session(self) -> ShopSession | None:
        """The current episode's page state machine (None before the first reset or after ``close``)."""
        return self._session

    def close(self) -> None:
        """Drop the episode; the shared world (catalog, index) stays open for other envs."""
        self._session = None

    def __enter__(self) -> ShopEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require_session(self) -> ShopSession:
        if self._session is None:
            raise EpisodeStateError("no active episode: call reset(task_id) first", code="no_active_episode")
        return self._session


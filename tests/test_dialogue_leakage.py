"""Leakage safety of dialogue mode over every surface the agent reads (issue 16 item 5).

``tests/test_dialogue_env.py`` checks ``ShopEnv`` in process. Here random question sequences (hypothesis: the
lexicon's question kinds, the vocabulary's attribute words and free text) go through the real HTTP server (uvicorn
in a thread) on both APIs, and through the agent runtime into traces, in process and over HTTP. Nothing the agent
can read before a purchase may contain the gold ASIN, the gold title or product name, the shop name, or the wording
of a slot (``dialogue/slots.py``) the shopper has not revealed. The agent's own words (the echoed action, the
question, its tool calls) are left out of the check: asking ``防水吗`` is no leak of 防水.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from live_server import serve
from shopsimrl.agent import (
    AgentRuntime,
    EpisodeJob,
    InProcessEnvironment,
    RuntimeConfig,
    ServiceEnvironment,
)
from shopsimrl.agent.validation import ModelOutput, interpret
from shopsimrl.contract import extract_action
from shopsimrl.dialogue.lexicon import (
    ATTRIBUTE_WORDS,
    AXIS_WORDS,
    BUDGET_WORDS,
    OPEN_WORDS,
    OPTION_WORDS,
    PRODUCT_WORDS,
    PURCHASE_WORDS,
)
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.dialogue.rule_shopper import RuleShopper
from shopsimrl.dialogue.vocabulary import attribute_words
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.env.tools import tools_for_state
from shopsimrl.server import ShopClient, create_app

# Question kinds of the lexicon, plus goal words (attribute keywords and paraphrases of the vocabulary).
KINDS: dict[str, tuple[str, ...]] = {
    "purchase": PURCHASE_WORDS, "budget": BUDGET_WORDS, "product": PRODUCT_WORDS, "attribute": ATTRIBUTE_WORDS,
    "open": OPEN_WORDS, "option": OPTION_WORDS,
    "axis": tuple(sorted({word for words in AXIS_WORDS.values() for word in words})),
    "vocabulary": tuple(sorted(attribute_words())),
}  # fmt: skip
kind_questions = st.lists(
    st.one_of(*(st.sampled_from(words) for words in KINDS.values()), st.sampled_from(["吗", "？", "呢", "的", "和"])),
    min_size=1, max_size=5,
).map("".join)  # fmt: skip
# Free text, except an ``Action:`` line: the HTTP layer would take that line as the action (a search, a click).
free_questions = st.text(max_size=60).filter(lambda text: "action" not in text.casefold())
questions = st.one_of(kind_questions, kind_questions, free_questions)
ECHO_KEYS = frozenset({"action"})  # the feedback's and last_action's echo of the agent's own action


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base(world: ShopWorld) -> Iterator[str]:
    with serve(create_app(world, slots=4)) as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[ShopClient]:
    with ShopClient(base) as shop:
        yield shop


@pytest.fixture(scope="module")
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


def values(value: object, skip: frozenset[str] = ECHO_KEYS) -> str:
    """Every string value (not the keys), one per line, without the values under the ``skip`` keys."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "\n".join(values(item, skip) for key, item in value.items() if key not in skip)
    if isinstance(value, (list, tuple)):
        return "\n".join(values(item, skip) for item in value)
    return "" if value is None else str(value)


def secrets(world: ShopWorld, task_id: int) -> list[str]:
    """The gold ASIN (as written and casefolded), the gold title, the goal's product name and the shop name."""
    goal = world.catalog.goal(task_id)
    product = world.catalog.products_by_asin[goal["asin"]]
    found = [goal["asin"], goal["asin"].casefold(), product.title, goal["name"]]
    shop = product.raw.get("shop_name")
    return [*found, str(shop)] if shop else found


def hidden_surfaces(shopper: RuleShopper) -> list[str]:
    """Wordings of the slots not revealed yet (except those inside a revealed slot's wording, or the noun's)."""
    revealed = set(shopper.revealed)
    said = [surface for slot in shopper.slots if slot.index in revealed for surface in slot.surfaces]
    return [
        surface
        for slot in shopper.slots
        if slot.index not in revealed
        for surface in slot.surfaces
        if surface and not any(surface in known for known in said)
    ]


def shopper_of(env: ShopEnv) -> RuleShopper:
    session = env.session
    assert session is not None
    shopper = getattr(session, "shopper", None)
    assert isinstance(shopper, RuleShopper)
    return shopper


def assert_clean(texts: Iterable[str], secret: list[str], hidden: list[str], where: str) -> None:
    for text in texts:
        leaked = [word for word in secret if word in text]
        assert not leaked, f"{where}: gold {leaked} in {text!r}"
        unasked = [word for word in hidden if word in text]
        assert not unasked, f"{where}: unasked slot wording {unasked} in {text!r}"


def check_payload(payload: Mapping[str, Any], secret: list[str], hidden: list[str], where: str) -> None:
    """A reset / step / state payload and the tools of its page. The persona is persona mode's public persona:
    it may support a requirement (that is its point), so it is checked for the gold only."""
    assert_clean([values(payload.get("user_persona"))], secret, [], f"{where} persona")
    rest = {key: value for key, value in payload.items() if key != "user_persona"}
    state = payload.get("observation_state")
    tools = tools_for_state(state) if isinstance(state, Mapping) else []
    assert_clean([values(rest), values(tools)], secret, hidden, where)


# --------------------------------------------------------------------------------------- both HTTP APIs

task_ids = st.sampled_from([0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_id=task_ids, asked=st.lists(questions, min_size=1, max_size=6), persona=st.sampled_from([None, False]),
       api=st.sampled_from(["reference", "v1", "client"]))
def test_nothing_unasked_reaches_the_agent_over_either_http_api(
    world: ShopWorld, http: httpx.Client, client: ShopClient, task_id: int, asked: list[str], persona: bool | None,
    api: str,
) -> None:
    """``client``: ``ShopClient`` (reference API underneath) with its own ``tools()`` and ``observation_state()``."""
    secret = secrets(world, task_id)
    mirror = ShopEnv(world, shoppers=shopper_registry())  # the same episode in process: which slots have been revealed after each question
    mirror.reset(task_id, persona=persona, shopper="rule")
    shopper = shopper_of(mirror)
    if api == "reference":
        reset = http.post("/api/shop_agent", json={"action": "reset", "idx": task_id, "if_persona": persona,
                                                   "shopper": "rule"})
        assert reset.status_code == 200, reset.text
        payload = reset.json()["result"]
        lease = {"env_idx": payload["env_idx"], "lease_id": payload["lease_id"]}
    elif api == "client":
        payload = client.reset(task_id, persona, shopper="rule")
    else:
        reset = http.post("/v1/sessions", json={"task_id": task_id, "persona": persona, "shopper": "rule"})
        assert reset.status_code == 201, reset.text
        payload = reset.json()
        session = payload["session_id"]
    try:
        assert payload["task_instruction"] == "" and payload["shopper_opening"]
        check_payload(payload, secret, hidden_surfaces(shopper), f"{api} reset")
        for question in asked:
            action = f"ask_user[{question}]"
            expected = mirror.step(extract_action(action))
            hidden = hidden_surfaces(shopper)
            if api == "reference":
                answer = http.post("/api/shop_agent", json={"action": "interact", **lease, "response": action})
                assert answer.status_code == 200, answer.text
                result = answer.json()["result"]
            elif api == "client":
                result = client.step(action)
                assert_clean([values(client.tools()), values(client.observation_state())], secret, hidden, "client")
            else:
                answer = http.post(f"/v1/sessions/{session}/step", json={"action": action})
                assert answer.status_code == 200, answer.text
                result = answer.json()
                state = http.get(f"/v1/sessions/{session}")
                assert state.status_code == 200, state.text
                check_payload(state.json(), secret, hidden, "v1 state")
            assert result["shopper_reply"] == expected["shopper_reply"]  # the served dialogue is the in-process one
            check_payload(result, secret, hidden, f"{api} step")
    finally:
        if api == "reference":
            http.post("/api/shop_agent", json={"action": "release_one", **lease})
        elif api == "client":
            client.release()
        else:
            http.delete(f"/v1/sessions/{session}")


# --------------------------------------------------------------------------------------- traces


def ask(question: str) -> dict[str, Any]:
    call = {"id": "call-0", "type": "function",
            "function": {"name": "ask_user", "arguments": json.dumps({"question": question}, ensure_ascii=False)}}
    return {"id": "c", "choices": [{"index": 0, "finish_reason": "tool_calls",
                                    "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


class Asker:
    """A scripted model that asks its questions in order (an empty or too long one is a repair turn)."""

    model_name = "asker"

    def __init__(self, questions: list[str]) -> None:
        self.payloads = [ask(question) for question in questions]

    def identity(self) -> dict[str, Any]:
        return {"provider": "scripted", "model": self.model_name}

    async def generate(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *, seed: int = 0,
        task_id: int | None = None
    ) -> ModelOutput:
        return interpret(self.payloads.pop(0), tools)

    async def close(self) -> None:
        return None


AGENT_KEYS = frozenset({"action", "question", "model", "tool_calls"})  # the agent's own words in a trace


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_id=task_ids, asked=st.lists(questions, min_size=1, max_size=6), over_http=st.booleans())
def test_trace_fields_before_the_purchase_hold_nothing_unasked(
    world: ShopWorld, base: str, task_id: int, asked: list[str], over_http: bool
) -> None:
    """Every trace field written before the episode ends (all but ``final`` and the private ``transcript``)."""
    environment = ServiceEnvironment(base) if over_http else InProcessEnvironment(world)
    config = RuntimeConfig(max_steps=len(asked), interaction_mode="multi_turn", shopper="rule")
    record = asyncio.run(AgentRuntime(Asker(asked), environment, config=config).run(EpisodeJob(task_id)))
    assert record["status"] == "completed", record["error"]
    assert record["final"]["termination_reason"] == "action_limit"  # no purchase: only questions were asked
    secret = secrets(world, task_id)
    mirror = ShopEnv(world, shoppers=shopper_registry())
    mirror.reset(task_id, shopper="rule")
    shopper = shopper_of(mirror)
    assert_clean([values(record["reset"].get("user_persona"))], secret, [], "trace reset persona")
    check_payload(record["reset"], secret, hidden_surfaces(shopper), "trace reset")
    for step in record["steps"]:
        if step["action"] is not None:
            mirror.step(step["action"])
        hidden = hidden_surfaces(shopper)
        shown = {key: value for key, value in step.items() if key not in AGENT_KEYS}
        assert_clean([values(shown, AGENT_KEYS)], secret, hidden, f"trace step {step['step_index']}")
    hidden = hidden_surfaces(shopper)  # the episode-wide fields, against what was revealed by its end
    system, *messages = record["conversation"]
    assert_clean([values(system)], secret, [], "trace system message (the persona)")
    heard = [message for message in messages if message["role"] != "assistant"]
    dialogue = {key: value for key, value in record["dialogue"].items() if key != "transcript"}
    assert [turn["reply"] for turn in dialogue["turns"]] == [s["dialogue"]["reply"] for s in record["steps"]
                                                             if "dialogue" in s]
    rest = {key: value for key, value in record.items()
            if key not in ("final", "dialogue", "conversation", "steps", "reset")}
    assert_clean([values(heard), values(dialogue, AGENT_KEYS), values(rest)], secret, hidden, "trace")

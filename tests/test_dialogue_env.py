"""Dialogue mode in the environment (issue 16): opt-in reset, ``ask_user`` bounds and limits, turn counting,
reference semantics untouched without a shopper, and the leakage properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.dialogue import NoiseConfig, ShopperConfig
from shopsimrl.dialogue.lexicon import ATTRIBUTE_WORDS, BUDGET_WORDS, OPEN_WORDS, PURCHASE_WORDS
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.env._observation import dialogue_lines
from shopsimrl.env.tools import tools_for_state
from shopsimrl.errors import RequestError
from shopsimrl.versions import (
    DIALOGUE_OBSERVATION_VERSION,
    DIALOGUE_TOOL_VERSION,
    EPISODE_LIMITS,
    MAX_QUESTION_CHARS,
    OBSERVATION_VERSION,
)


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


def names(tools: list[dict]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


# --------------------------------------------------------------------------------------- opt-in reset


def test_without_a_shopper_the_reset_and_tools_are_the_reference(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    reset = env.reset(3)
    assert set(reset) == {
        "task_instruction", "observation", "message", "idx", "task_mode", "interaction_mode",
        "environment_version", "observation_state", "user_persona",
    }  # fmt: skip
    assert reset["task_instruction"] == world.catalog.goal(3)["instruction_simple"]
    assert "dialogue" not in reset["observation_state"] and "对话" not in reset["observation"]
    assert names(env.tools()) == ["search"]
    result = env.step("ask_user[预算多少？]")  # not an action outside dialogue mode: the reference's answer
    assert result["action_feedback"]["reason"] == "invalid_format"
    assert result["action_feedback"]["message"] == "动作必须使用 search[...] 或 click[...] 格式"
    assert "shopper_reply" not in result and "dialogue" not in result


def test_dialogue_reset_withholds_the_instruction_and_shows_the_persona(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    plain = env.reset(3)
    reset = env.reset(3, shopper="rule")
    assert reset["task_instruction"] == ""
    assert reset["shopper_opening"] == "你好，我想买个迷你冰箱，你帮我挑一个吧。"
    assert reset["interaction_mode"] == "multi_turn" and env.session.max_actions == EPISODE_LIMITS["multi_turn"]
    assert reset["task_mode"] == "persona" and reset["user_persona"] == plain["user_persona"]
    assert reset["dialogue_version"] == DIALOGUE_OBSERVATION_VERSION
    assert reset["tool_version"] == DIALOGUE_TOOL_VERSION and reset["shopper"] == "rule"
    state = reset["observation_state"]
    assert state["observation_version"] == OBSERVATION_VERSION  # the page part is the v7 page
    assert state["dialogue"] == {
        "dialogue_version": DIALOGUE_OBSERVATION_VERSION, "shopper": "rule", "questions_asked": 0,
        "max_questions": 10, "ask_user_available": True,
    }  # fmt: skip
    assert reset["observation"] == plain["observation"] + dialogue_lines(state["dialogue"])
    assert names(env.tools()) == ["search", "ask_user"]
    assert env.reset(3, persona=False, shopper="rule")["user_persona"] == {}


@pytest.mark.parametrize("shopper", ["llm", "gpt", ""])
def test_unavailable_or_unknown_shoppers_are_typed_errors(world: ShopWorld, shopper: str) -> None:
    with raises_kind(RequestError, "dialogue_unavailable"):
        ShopEnv(world, shoppers=shopper_registry()).reset(3, shopper=shopper)


def test_a_shopper_config_of_the_wrong_type_is_a_typed_error(world: ShopWorld) -> None:
    with raises_kind(RequestError, "dialogue_unavailable"):
        ShopEnv(world, shoppers=shopper_registry()).reset(3, shopper="rule", shopper_config={"max_questions": 3})  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------- ask_user


def test_ask_user_leaves_the_page_and_returns_the_reply(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule")
    env.step("search[迷你冰箱]")
    before = env.observation_state()
    result = env.step("ask_user[你的预算是多少？]")
    assert result["shopper_reply"] == "嗯，价格在500元左右。"
    feedback = result["action_feedback"]
    assert feedback == {
        "action": "ask_user[你的预算是多少？]", "valid": True, "reason": "executed",
        "message": "顾客回复：嗯，价格在500元左右。", "reply": "嗯，价格在500元左右。",
    }  # fmt: skip
    after = result["observation_state"]
    strip = ("last_action", "dialogue")
    assert {k: v for k, v in after.items() if k not in strip} == {k: v for k, v in before.items() if k not in strip}
    assert after["dialogue"]["questions_asked"] == 1
    assert "- 说明：顾客回复：嗯，价格在500元左右。" in result["observation"]
    assert names(env.tools()) == ["click", "ask_user"]
    assert env.step("click[back to search]")["shopper_reply"] is None


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("ask_user[]", "empty_argument"),
        ("ask_user[   ]", "empty_argument"),
        ("ask_user[" + "问" * (MAX_QUESTION_CHARS + 1) + "]", "question_too_long"),
        ("ask_user[预算？] ask_user[颜色？]", "multiple_actions_not_allowed"),
        ("ask_user[预算？] search[冰箱]", "multiple_actions_not_allowed"),
        ("ask_user[预算？\n颜色？]", "invalid_format"),
        ("ASK_USER", "empty_argument"),  # a bare name, as a bare `search`
    ],
)
def test_bad_questions_are_invalid_feedback_and_cost_a_turn(world: ShopWorld, action: str, reason: str) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule")
    result = env.step(action)
    assert result["action_feedback"]["valid"] is False
    assert result["action_feedback"]["reason"] == reason
    assert result["shopper_reply"] is None
    assert result["observation_state"]["dialogue"]["questions_asked"] == 0
    assert env.session.action_count == 1


def test_a_question_of_exactly_the_bound_is_answered(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule")
    result = env.step("ask_user[" + "预" * MAX_QUESTION_CHARS + "]")
    assert result["action_feedback"]["valid"] is True and result["shopper_reply"]


def test_the_tool_disappears_after_the_question_limit(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule", shopper_config=ShopperConfig(max_questions=3))
    for _ in range(3):
        assert "ask_user" in names(env.tools())
        assert env.step("ask_user[预算多少？]")["action_feedback"]["valid"] is True
    assert names(env.tools()) == ["search"]
    state = env.observation_state()
    assert state["dialogue"]["ask_user_available"] is False
    assert "提问次数已用完" in env.observation()
    result = env.step("ask_user[还有吗？]")
    assert result["action_feedback"]["reason"] == "ask_user_unavailable"
    assert env.session.action_count == 4


def test_zero_questions_means_no_tool_from_the_start(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule", shopper_config=ShopperConfig(max_questions=0))
    assert names(env.tools()) == ["search"]


def test_every_question_counts_toward_the_forty_turns(world: ShopWorld) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(3, shopper="rule", shopper_config=ShopperConfig(max_questions=100))
    for turn in range(1, EPISODE_LIMITS["multi_turn"] + 1):
        result = env.step(f"ask_user[第{turn}个问题：预算多少？]")
    assert result["done"] is True and result["termination_reason"] == "action_limit"
    assert result["reward"] == 0.0 and env.tools() == []
    assert result["dialogue"]["questions_asked"] == 40 and result["dialogue"]["ask_user_available"] is False
    assert "对话" not in result["observation"]  # the terminal page offers nothing


def test_buy_now_is_never_blocked_by_the_shopper(world: ShopWorld) -> None:
    goal = world.catalog.goal(5)
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(5, shopper="rule")
    assert env.step("ask_user[可以下单吗？]")["shopper_reply"].startswith("信息还不完整")
    env.step("search[开放式耳机 低夹耳压力]")
    env.step(f"click[{goal['asin'].casefold()}]")
    result = env.step("click[buy now]")
    assert result["done"] and result["termination_reason"] == "purchase"
    assert result["dialogue"]["slots_revealed"] == 1 and result["dialogue"]["slots_total"] == 3


def test_tools_for_state_offers_ask_user_only_with_an_available_dialogue_block() -> None:
    home = {"observation_version": OBSERVATION_VERSION, "page_type": "search_home", "search_available": True,
            "actions": []}  # fmt: skip
    assert names(tools_for_state(home)) == ["search"]
    assert names(tools_for_state({**home, "dialogue": {"ask_user_available": True}})) == ["search", "ask_user"]
    assert names(tools_for_state({**home, "dialogue": {"ask_user_available": False}})) == ["search"]
    schema = tools_for_state({**home, "dialogue": {"ask_user_available": True}})[1]["function"]["parameters"]
    assert schema["properties"]["question"]["maxLength"] == MAX_QUESTION_CHARS
    assert schema["properties"]["question"]["minLength"] == 1


def test_the_page_part_of_a_dialogue_episode_is_the_plain_episode(world: ShopWorld) -> None:
    """Whatever the agent asks, the pages it sees are the ones a plain episode shows for the same page actions."""
    plain, talk = ShopEnv(world, shoppers=shopper_registry()), ShopEnv(world, shoppers=shopper_registry())
    plain.reset(7, interaction_mode="multi_turn")
    talk.reset(7, shopper="rule")
    for action in ("search[连衣裙]", "click[next >]", "click[< prev]", "click[back to search]", "search[碎花 连衣裙]"):
        talk.step("ask_user[有什么要求？]")
        expected = plain.step(action)
        got = talk.step(action)
        assert got["observation"] == expected["observation"] + dialogue_lines(got["observation_state"]["dialogue"])
        assert {k: v for k, v in got["observation_state"].items() if k != "dialogue"} == expected["observation_state"]


def test_the_gymnasium_wrapper_plays_dialogue_mode(world: ShopWorld) -> None:
    from shopsimrl.env.gym import ShopGymEnv

    gym_env = ShopGymEnv(world, shopper="rule", shopper_config=ShopperConfig(max_questions=2), shoppers=shopper_registry())
    observation, info = gym_env.reset(options={"task_id": 3})
    assert info["task_instruction"] == "" and info["shopper_opening"].endswith("你帮我挑一个吧。")
    assert names(info["tools"]) == ["search", "ask_user"] and "对话" in observation
    observation, reward, terminated, truncated, info = gym_env.step("ask_user[预算多少？]")
    assert info["shopper_reply"] == "嗯，价格在500元左右。" and reward == 0.0 and not terminated and not truncated
    plain = ShopGymEnv(world)
    assert "shopper_opening" not in plain.reset(options={"task_id": 3})[1]
    assert "shopper_reply" not in plain.step("search[冰箱]")[4]


# --------------------------------------------------------------------------------------- leakage

_QUESTION_PARTS = [
    *PURCHASE_WORDS, *BUDGET_WORDS, *ATTRIBUTE_WORDS, *OPEN_WORDS, "颜色", "尺码", "容量", "规格", "吗", "？",
    "防水", "静音", "收腰", "M", "白色", "蓝色碎花", "45升", "降噪", "乳胶", "]", "[", "ask_user[", "search",
]  # fmt: skip
questions = st.one_of(
    st.lists(st.sampled_from(_QUESTION_PARTS), min_size=1, max_size=6).map("".join),
    st.text(min_size=0, max_size=40),
)


def _values(value: object) -> str:
    """Every string value (not the keys: ``maxLength`` is no leak of the size ``L``), one per line."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_values(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return "\n".join(_values(item) for item in value)
    return str(value)


def _surfaces(env: ShopEnv, revealed: set[int]) -> list[str]:
    """Wordings of the slots the shopper has not revealed (not inside a revealed slot's or the noun's words)."""
    shopper = env.session.shopper  # type: ignore[union-attr]
    said = [slot for slot in shopper.slots if slot.index in revealed]
    out = []
    for slot in shopper.slots:
        if slot.index in revealed:
            continue
        for surface in slot.surfaces:
            if surface and not any(surface in known for known_slot in said for known in known_slot.surfaces):
                out.append(surface)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    task_id=st.sampled_from([0, 1, 3, 4, 5, 7, 8, 9, 11, 12, 13, 14, 15]),
    asked=st.lists(questions, min_size=1, max_size=8),
    omit=st.sampled_from([0.0, 0.5]),
    paraphrase=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 3),
)
def test_nothing_hidden_reaches_the_agent_except_asked_slots(
    world: ShopWorld, task_id: int, asked: list[str], omit: float, paraphrase: float, seed: int
) -> None:
    goal = world.catalog.goal(task_id)
    product = world.catalog.products_by_asin[goal["asin"]]
    secrets = [goal["asin"], goal["asin"].casefold(), product.title, goal["name"]]
    shop = product.raw.get("shop_name")
    if shop:
        secrets.append(str(shop))
    config = ShopperConfig(sample_seed=seed, noise=NoiseConfig(omit=omit, approximate_budget=0.5, paraphrase=paraphrase))
    env = ShopEnv(world, shoppers=shopper_registry())
    reset = env.reset(task_id, shopper="rule", shopper_config=config)
    shopper = env.session.shopper  # type: ignore[union-attr]
    assert not any(secret in _values(reset) for secret in secrets)
    # The persona is the public persona of persona mode (checked equal above): it may support a requirement
    # (that is persona mode's point), so only the dialogue-owned rest is checked for unasked slots.
    seen = [_values({k: v for k, v in reset.items() if k != "user_persona"}), _values(env.tools())]
    revealed = set(shopper.revealed)
    for text in seen:
        assert not any(secret in text for secret in secrets)
        assert not any(surface in text for surface in _surfaces(env, revealed))
    for question in asked:
        if env.done:
            break
        result = env.step(f"ask_user[{question}]")
        revealed = set(shopper.revealed)
        state = {k: v for k, v in result["observation_state"].items() if k != "last_action"}
        visible = [
            result["shopper_reply"] or "",
            result["observation"].replace(question, ""),
            _values(state),
            _values(env.tools()),
            _values({k: v for k, v in result.items() if k not in ("observation", "observation_state")}).replace(
                question, ""
            ),
        ]
        hidden = _surfaces(env, revealed)
        for text in visible:
            assert not any(secret in text for secret in secrets), text
            assert not any(surface in text for surface in hidden), (text, hidden)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(max_size=MAX_QUESTION_CHARS + 20))
def test_any_ask_user_action_is_answered_or_rejected_with_a_code(world: ShopWorld, question: str) -> None:
    env = ShopEnv(world, shoppers=shopper_registry())
    env.reset(4, shopper="rule")
    result = env.step(f"ask_user[{question}]")
    feedback = result["action_feedback"]
    answered = feedback["valid"]
    assert answered == (result["shopper_reply"] is not None)
    assert result["observation_state"]["dialogue"]["questions_asked"] == int(answered)
    assert env.session.action_count == 1 and not result["done"]
    if answered:
        assert 0 < len(question) <= MAX_QUESTION_CHARS and question.strip() and "\n" not in question
        assert feedback["message"] == "顾客回复：" + result["shopper_reply"]
    else:
        assert feedback["reason"] in {
            "empty_argument", "question_too_long", "multiple_actions_not_allowed", "invalid_format",
        }  # fmt: skip

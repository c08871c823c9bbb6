"""The in-process episode engine on the fixture catalog (issue 3 items 1, 2, 6, 7)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.env import ShopWorld
from shopsimrl.errors import EpisodeStateError, RequestError

CART = 0  # task of the snack cart (gold 824100258497)
QUERY = "可移动小吃车 煤气灶 三个锅 煎锅 关东煮 油炸 1000-1200元"
GOLD_OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"


@pytest.fixture(scope="module")
def world(prepared_dir):
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture
def env(world):
    return world.new_env()


def _play(env, actions, task=CART, persona=True):
    env.reset(task, persona=persona)
    return [env.step(action) for action in actions]


def test_reset_payload_shows_simple_task_and_public_persona(env):
    payload = env.reset(CART, persona=True)
    assert payload["task_instruction"].startswith("查一款可移动的小吃车")
    assert payload["task_mode"] == "persona" and payload["message"] == f"Task {CART} started"
    assert payload["environment_version"] == "shopsimulator-paper-aligned-v8"
    assert "__reasoning__" not in payload["user_persona"] and payload["user_persona"]["用户ID"] == "u_3538"
    assert payload["observation"] == "页面：搜索首页\n\n页面能力：\n- 支持商品搜索\n"
    for hidden in ("private_task_instruction", "goal_options", "reason_key", "instruction", "instruction_simple"):
        assert hidden not in payload
    private = env.reset(CART, persona=True, include_private_goal=True)
    assert private["private_task_instruction"].startswith("我想买一款可移动的流动小吃车")
    assert private["goal_options"] == ["三锅小吃车煮面炉＋关东煮＋油炸"]
    standard = env.reset(CART, persona=False)
    assert standard["task_instruction"] == private["private_task_instruction"]
    assert standard["task_mode"] == "standard" and standard["user_persona"] == {}


def _feedback(action, valid, reason, message, **extra):
    return {"action": action, "valid": valid, "reason": reason, "message": message, **extra}


def test_every_step_outcome_has_its_exact_feedback(env):
    """Each rule of docs/contract.md#step-checks, through the state machine, with its exact reason and message."""
    env.reset(CART, persona=True)
    outcomes = [
        ("search[ ]", _feedback("search[ ]", False, "empty_argument", "search[...] 的关键词不能为空")),
        ("finish", _feedback("finish", False, "invalid_format", "动作必须使用 search[...] 或 click[...] 格式")),
        ("click[黑色], click[大号]", _feedback("click[黑色], click[大号]", False, "multiple_actions_not_allowed",
                                          "一次调用只能执行一个 search[...] 或 click[...] 动作")),
        ("click", _feedback("click", False, "empty_argument", "click[...] 的点击值不能为空")),
        (f"search[{QUERY}]", _feedback(f"search[{QUERY}]", True, "executed", "搜索已执行")),
        ("search[x]", _feedback("search[x]", False, "search_unavailable", "当前页面不提供搜索操作")),
        ("click[Buy Now]", _feedback("click[Buy Now]", False, "unavailable_action", "当前页面不存在可点击项：Buy Now")),
        ("click[824100258497]", _feedback("click[824100258497]", True, "executed", "点击已执行")),
        ("click[buy now]", _feedback("click[buy now]", False, "incomplete_options", "购买前还需选择规格轴：颜色分类",
                                     missing_option_axes=["颜色分类"])),
        (f"click[{GOLD_OPTION}]", _feedback(f"click[{GOLD_OPTION}]", True, "executed", "点击已执行")),
        (f"click[{GOLD_OPTION}]", _feedback(f"click[{GOLD_OPTION}]", False, "already_selected",
                                            f"该规格已经选中：{GOLD_OPTION}")),
        ("click[buy now]", _feedback("click[buy now]", True, "executed", "购买已执行")),
    ]
    for action, expected in outcomes:
        result = env.step(action)
        assert result["action_feedback"] == expected, action
        assert result["message"] == ("Continue interaction" if expected["valid"] else "Invalid action")
    assert env.done


def test_seed_worked_example_succeeds_in_four_steps(env):
    results = _play(env, [f"search[{QUERY}]", "click[824100258497]", f"click[{GOLD_OPTION}]", "click[buy now]"])
    search, product, option, buy = results
    assert "824100258497" in search["observation_state"]["actions"]
    assert product["observation_state"]["missing_option_axes"] == ["颜色分类"]
    assert "buy now" not in product["observation_state"]["actions"]
    state = option["observation_state"]
    assert state["selected_price"] == 1100.0 and state["options_complete"] is True
    assert state["missing_option_axes"] == [] and "buy now" in state["actions"]
    assert GOLD_OPTION not in state["actions"]
    assert buy["done"] and buy["reward"] == 1.0 and buy["termination_reason"] == "purchase"
    detail = buy["reward_detail"]
    assert (detail["r_type"], detail["r_att"], detail["r_option"], detail["r_price"]) == (1.0, 1.0, 1.0, 1.0)
    assert detail["r_strict"] == 1.0 and detail["r_success"] == 1 and detail["target_asin_match"] is True
    assert buy["purchase"]["price"] == 1100.0 and buy["goal"]["asin"] == "824100258497"
    assert buy["observation"].startswith("页面：任务已终止\n不能再执行操作。")
    assert buy["observation_state"]["actions"] == []


def test_non_gold_product_that_meets_every_requirement_succeeds(env):
    results = _play(env, [f"search[{QUERY}]", "click[824100258498]", f"click[{GOLD_OPTION}]", "click[buy now]"])
    detail = results[-1]["reward_detail"]
    assert detail["r_success"] == 1 and detail["target_asin_match"] is False


def test_gold_product_with_wrong_option_fails_strict_but_keeps_loose(env):
    results = _play(env, [f"search[{QUERY}]", "click[824100258497]", "click[颜色分类=单锅小吃车油炸款]", "click[buy now]"])
    detail = results[-1]["reward_detail"]
    assert detail["target_asin_match"] is True and detail["r_option"] == 0.0
    assert detail["r_strict"] == 0.0 and detail["r_loose"] == 0.75 and results[-1]["reward"] == 0.0


def test_feedback_codes_in_contract_order(env):
    env.reset(CART)
    assert env.step("click[buy now]")["action_feedback"]["reason"] == "unavailable_action"
    assert env.step("search[ ]")["action_feedback"]["reason"] == "empty_argument"
    assert env.step("finish")["action_feedback"]["reason"] == "invalid_format"
    assert env.step("search[a]\nsearch[b]")["action_feedback"]["reason"] == "multiple_actions_not_allowed"
    assert env.step("hello\nworld")["action_feedback"]["reason"] == "invalid_format"
    assert env.step("click[x], click[y]")["action_feedback"]["reason"] == "multiple_actions_not_allowed"
    env.step(f"search[{QUERY}]")
    assert env.step("search[again]")["action_feedback"]["reason"] == "search_unavailable"
    env.step("click[824100258497]")
    incomplete = env.step("click[buy now]")["action_feedback"]
    assert incomplete["reason"] == "incomplete_options" and incomplete["missing_option_axes"] == ["颜色分类"]
    assert incomplete["message"] == "购买前还需选择规格轴：颜色分类"
    env.step(f"click[{GOLD_OPTION}]")
    again = env.step(f"click[{GOLD_OPTION}]")["action_feedback"]
    assert again["reason"] == "already_selected" and again["message"] == f"该规格已经选中：{GOLD_OPTION}"
    assert env.step("click[Buy Now]")["action_feedback"]["reason"] == "unavailable_action"
    assert env.session.action_count == 13


def test_prev_clears_options_and_back_returns_home(env):
    env.reset(CART)
    env.step(f"search[{QUERY}]")
    env.step("click[824100258497]")
    env.step(f"click[{GOLD_OPTION}]")
    back = env.step("click[< prev]")
    assert back["observation_state"]["page_type"] == "search_results"
    reopened = env.step("click[824100258497]")
    assert reopened["observation_state"]["selected_options"] == {}
    home = env.step("click[back to search]")
    assert home["observation_state"]["page_type"] == "search_home"
    assert home["observation_state"]["search_available"] is True


def test_action_limit_ends_on_the_terminal_page_with_zero_detail(env):
    env.reset(CART)
    result = None
    for _ in range(30):
        result = env.step("click[nothing]")
    assert result["done"] and result["termination_reason"] == "action_limit"
    assert result["reward"] == 0.0 and result["purchase"] == {} and result["reward_detail"]["r_success"] == 0
    assert result["observation_state"]["page_type"] == "terminal"
    with raises_kind(EpisodeStateError, "episode_terminated", match="already terminated"):
        env.step("click[nothing]")
    with raises_kind(EpisodeStateError, "episode_terminated"):
        env.terminate("action_limit")


def test_multi_turn_limit_is_forty(env):
    env.reset(CART, interaction_mode="multi_turn")
    for _ in range(39):
        assert not env.step("click[nothing]")["done"]
    assert env.step("click[nothing]")["termination_reason"] == "action_limit"
    with pytest.raises(ValueError, match="unsupported interaction_mode"):
        env.reset(CART, interaction_mode="chat")


def test_terminate_generation_length(env):
    env.reset(CART)
    env.step("search[x]")  # a previous step's feedback must not be repeated by terminate (issue 13 item 10)
    result = env.terminate("generation_length")
    assert result["done"] and result["termination_reason"] == "generation_length"
    assert "action_feedback" not in result and result["message"] == "Episode terminated: generation_length"
    assert result["reward"] == 0.0
    assert result["reward_detail"]["termination_reason"] == "generation_length"
    assert result["observation_state"]["page_type"] == "terminal"
    env.reset(CART)
    with pytest.raises(ValueError, match="unsupported termination reason: finish"):
        env.terminate("finish")


def test_unknown_or_inactive_task_is_typed(env):
    for task in (6, 16, 999):
        with raises_kind(RequestError, "unknown_task", match=f"unknown or inactive task_id {task}"):
            env.reset(task)


def test_legacy_prefixes_are_plain_text(env):
    env.reset(CART)
    result = env.step("search[<r>]")
    assert result["action_feedback"]["valid"] and result["observation_state"]["total_results"] == 0


def test_tools_follow_the_page(env):
    env.reset(CART)
    assert [t["function"]["name"] for t in env.tools()] == ["search"]
    env.step(f"search[{QUERY}]")
    tools = env.tools()
    assert [t["function"]["name"] for t in tools] == ["click"]
    assert tools[0]["function"]["parameters"]["properties"]["value"]["enum"] == env.observation_state()["actions"]


SECRET_KEYS = ("goal", "reward_detail", "price_upper", "goal_options", "target_asin", "r_strict", "answer")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=12), task=st.sampled_from([0, 3, 9]))
def test_no_private_goal_leaks_before_purchase(world, choices, task):
    env = world.new_env()
    payload = env.reset(task, persona=True)
    goal = world.catalog.goals[task]
    secrets = [json.dumps(goal["attributes"], ensure_ascii=False), json.dumps(goal["goal_options"], ensure_ascii=False)]

    def check(blob: object) -> None:
        text = json.dumps(blob, ensure_ascii=False, sort_keys=True)
        for key in SECRET_KEYS:
            assert f'"{key}"' not in text
        for secret in secrets:
            assert secret not in text

    check({k: v for k, v in payload.items() if k != "user_persona"})  # the persona is public by design
    for choice in choices:
        tools = env.tools()
        check(tools)
        state = env.observation_state()
        action = "search[小吃车 关东煮]" if state["search_available"] else f"click[{state['actions'][choice % len(state['actions'])]}]"
        if action == "click[buy now]":
            break
        result = env.step(action)
        if result["done"]:
            break
        check({k: result[k] for k in ("observation", "observation_state", "action_feedback")})
        assert result["reward_detail"] == {} and result["purchase"] == {} and result["goal"] == {}
        assert result["reward"] == 0.0


DETERMINISM_SCRIPT = """
import json, sys
from shopsimrl.env import ShopEnv
env = ShopEnv.from_data_dir(sys.argv[1])
out = [env.reset(0)]
for a in sys.argv[2:]:
    out.append(env.step(a))
sys.stdout.write(json.dumps(out, ensure_ascii=False, sort_keys=True))
"""


def test_same_actions_in_two_processes_are_byte_identical(prepared_dir):
    actions = [f"search[{QUERY}]", "click[next >]", "click[824100258497]", "click[x]", f"click[{GOLD_OPTION}]", "click[buy now]"]
    runs = [
        subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT, str(prepared_dir), *actions],
            capture_output=True, check=True,
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and b'"r_strict": 1.0' in runs[0]


def test_mutating_an_observation_does_not_touch_shared_page_data(world):
    first, second = world.new_env(), world.new_env()
    for env in (first, second):
        env.reset(CART)
    state = first.step(f"search[{QUERY}]")["observation_state"]
    state["products"][0]["key_attributes"].append("篡改")
    state["products"][0]["title"] = "篡改"
    clean = second.step(f"search[{QUERY}]")["observation_state"]
    assert "篡改" not in json.dumps(clean, ensure_ascii=False)


from hypothesis import given as _given  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402

_json_like = _st.recursive(
    _st.none() | _st.booleans() | _st.integers() | _st.floats(allow_nan=False) | _st.text(max_size=5),
    lambda inner: _st.lists(inner, max_size=4) | _st.tuples(inner, inner)
    | _st.dictionaries(_st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@_given(_json_like)
def test_plain_copy_equals_deepcopy_and_is_independent(value: object) -> None:
    import copy

    from shopsimrl.catalog.plain_copy import plain_copy

    copied = plain_copy(value)
    assert copied == copy.deepcopy(value)
    assert type(copied) is type(value)
    if isinstance(value, (dict, list)):
        assert copied is not value

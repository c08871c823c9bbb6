"""Built-in policies on a small generated catalog: oracle solvability, heuristic baseline, page-text parsing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.agent import PolicyContext, context_from_messages, parse_page, play_episode
from shopsimrl.agent.difficulty import data_statistics
from shopsimrl.agent.policies import OraclePolicy, make_policy
from shopsimrl.agent.policies.heuristic import HeuristicPolicy
from shopsimrl.catalog import PrepareOptions
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import DataError, PolicyError
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog

SMALL = GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150)
SMALL_SPLITS = PrepareOptions(test_size=30, val_size=30)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("small") / "default"
    build_default_catalog(out, seed=7, config=SMALL, options=SMALL_SPLITS)
    return out


@pytest.fixture(scope="module")
def world(small_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(small_dir)


def test_build_default_is_cached(small_dir: Path) -> None:
    archive = small_dir / "source" / "default_catalog.json.gz"
    before = archive.stat().st_mtime_ns
    manifest = build_default_catalog(small_dir, seed=7, config=SMALL, options=SMALL_SPLITS)
    assert manifest.get("up_to_date") is True
    assert archive.stat().st_mtime_ns == before


def test_build_default_refuses_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with raises_kind(DataError, "dataset_build", match="not built by build-default"):
        build_default_catalog(tmp_path, seed=7, config=SMALL, options=SMALL_SPLITS)


def test_oracle_solves_every_sampled_task(world: ShopWorld) -> None:
    env, oracle = world.new_env(), OraclePolicy(world)
    task_ids = sorted(world.catalog.goals)[::3]  # a third of all tasks, persona and standard
    failures = [t for t in task_ids if not play_episode(env, oracle, t).success]
    assert failures == []


def test_oracle_behind_a_chat_protocol_resolves_the_task_from_the_text(world: ShopWorld) -> None:
    """Without a task id the oracle finds the task from the visible instruction and persona user id."""
    env, oracle = world.new_env(), OraclePolicy(world)
    for task_id in list(world.catalog.split("test"))[:5]:
        reset = env.reset(task_id, persona=True)
        context = PolicyContext(
            instruction=reset["task_instruction"], observation=reset["observation"], tools=env.tools(),
            persona=reset["user_persona"],
        )
        assert oracle.resolve_task(context) == task_id


def test_oracle_refuses_an_unknown_instruction(world: ShopWorld) -> None:
    context = PolicyContext(instruction="不存在的任务", observation="页面：搜索首页\n", tools=[])
    with pytest.raises(PolicyError, match="cannot find a task"):
        OraclePolicy(world).act(context)


def test_heuristic_beats_random_and_is_deterministic(world: ShopWorld) -> None:
    env = world.new_env()
    heuristic, random_policy = HeuristicPolicy(), make_policy("random", world)
    ids = list(world.catalog.split("test"))
    first = [play_episode(env, heuristic, t) for t in ids]
    second = [play_episode(env, heuristic, t) for t in ids]
    assert [o.actions for o in first] == [o.actions for o in second]
    heuristic_rate = sum(o.success for o in first) / len(ids)
    random_rate = sum(play_episode(env, random_policy, t).success for t in ids) / len(ids)
    assert heuristic_rate > random_rate
    assert 0.0 < heuristic_rate < 1.0


def test_heuristic_needs_no_private_data() -> None:
    """The heuristic is built without a world: it cannot read goals."""
    policy = make_policy("heuristic", world=None)  # type: ignore[arg-type]
    action = policy.act(PolicyContext(
        instruction="想买一款防滑的瑜伽垫，价格在100元以内", observation="页面：搜索首页\n",
        tools=[{"type": "function", "function": {"name": "search", "parameters": {}}}],
    ))
    assert action.name == "search"
    assert "100元以内" not in action.arguments["query"]
    assert "瑜伽垫" in action.arguments["query"]


def test_unknown_policy_name(world: ShopWorld) -> None:
    with pytest.raises(PolicyError, match="unknown policy"):
        make_policy("genius", world)


def _check_page(observation: str, state: dict) -> None:
    page = parse_page(observation)
    assert page.clickables == state.get("actions", [])
    kind = state["page_type"]
    if kind == "search_results":
        assert page.kind == kind
        assert [item.asin for item in page.items] == [p["asin"] for p in state["products"]]
        assert [item.title for item in page.items] == [p["title"] for p in state["products"]]
        assert [item.attributes for item in page.items] == [p.get("key_attributes") or [] for p in state["products"]]
        assert page.page_number == state["page"]
    elif kind == "product_detail":
        assert page.kind == kind and page.product is not None
        assert page.product.asin == state["product"]["asin"]
        assert page.selected == state["selected_options"]
        assert page.options == state["available_options"]
        assert page.missing == state.get("missing_option_axes", [])
    else:
        assert page.kind == kind


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choices=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=12))
def test_page_text_reads_back_every_rendered_page(world: ShopWorld, choices: list[int]) -> None:
    env = world.new_env()
    task_id = sorted(world.catalog.goals)[choices[0] % len(world.catalog.goals)]
    reset = env.reset(task_id)
    _check_page(reset["observation"], reset["observation_state"])
    query = world.catalog.goal(task_id)["name"]
    for choice in choices:
        state = env.observation_state()
        if state.get("search_available"):
            result = env.step(f"search[{query}]")
        elif state.get("actions"):
            result = env.step(f"click[{state['actions'][choice % len(state['actions'])]}]")
        else:
            break
        _check_page(result["observation"], result["observation_state"])
        if result["done"]:
            break


def test_context_from_messages_matches_the_in_process_context(world: ShopWorld) -> None:
    env = world.new_env()
    task_id = world.catalog.split("test")[0]
    reset = env.reset(task_id, persona=True)
    persona = reset["user_persona"]
    messages = [
        {"role": "system", "content": "规则\n\n用户个人文档：\n" + json.dumps(persona, ensure_ascii=False, sort_keys=True)},
        {"role": "user", "content": "购物任务：\n" + reset["task_instruction"] + "\n\n" + reset["observation"]},
    ]
    oracle = OraclePolicy(world)
    history = []
    for turn in range(4):
        tools = env.tools()
        rebuilt = context_from_messages(messages, tools)
        assert rebuilt.instruction == reset["task_instruction"]
        assert dict(rebuilt.persona) == persona
        assert [t.action for t in rebuilt.history] == history
        action = oracle.act(rebuilt)
        if turn == 1:  # a protocol error in between: feedback only, no environment action
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": "bad", "type": "function", "function": {"name": "click", "arguments": "{oops"}}]})
            messages.append({"role": "tool", "tool_call_id": "bad",
                             "content": json.dumps({"type": "tool_protocol_error", "code": "invalid_arguments_json"})})
        call_id = f"call-{turn}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": action.name, "arguments": json.dumps(dict(action.arguments), ensure_ascii=False)}}]})
        result = env.step(action.canonical)
        history.append(action.canonical)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result["observation"]})
        assert context_from_messages(messages, env.tools()).observation == result["observation"]
        if result["done"]:
            break


def test_context_from_messages_rejects_garbage() -> None:
    with pytest.raises(PolicyError):
        context_from_messages([{"role": "system", "content": "x"}], [])
    with pytest.raises(PolicyError, match="persona"):
        context_from_messages([{"role": "system", "content": "用户个人文档：\n{not json"}], [])


def test_data_stats_json_keys(small_dir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "shopsimrl.cli", "data", "stats", str(small_dir), "--json",
         "--oracle-sample", "40", "--workers", "1"],
        check=True, capture_output=True, text=True,
    )
    stats = json.loads(completed.stdout)
    for key in (
        "raw_products", "products", "excluded_products", "persona_tasks", "standard_tasks", "splits", "domains",
        "leaf_categories", "leaf_size_min", "leaf_size_max", "budget_kinds", "oracle_success", "public_success",
        "recall_at_20_simple", "recall_at_20_full",
    ):
        assert key in stats, key
    assert stats["raw_products"] == 600 and stats["excluded_products"] == 20
    assert stats["products"] == 580
    assert stats["persona_tasks"] == 150
    assert stats["splits"] == {"train": 90, "val": 30, "test": 30}
    assert stats["oracle_success"] == 1.0 and stats["oracle"]["tasks"] == 40
    assert 0.0 <= stats["public_success"] <= 1.0
    assert sum(stats["budget_kinds"].values()) == stats["products"]
    # in a pipe the progress is lines (issue 28 item 4): each policy's episodes, at least at their end
    assert "oracle episodes 40/40" in completed.stderr and "heuristic episodes" in completed.stderr
    # the second call is answered from DIR/stats.json, without opening the catalog, and says so
    again = data_statistics(small_dir, oracle_sample=40, workers=1)
    assert again == stats
    cached = subprocess.run(
        [sys.executable, "-m", "shopsimrl.cli", "data", "stats", str(small_dir), "--json", "--oracle-sample", "40"],
        check=True, capture_output=True, text=True,
    )
    assert json.loads(cached.stdout) == stats and "(cached; --no-cache recomputes)" in cached.stderr
    assert "episodes" not in cached.stderr


def test_in_process_env_from_data_dir(small_dir: Path) -> None:
    env = ShopEnv.from_data_dir(small_dir)
    assert env.reset(sorted(env.world.catalog.goals)[0])["observation"].startswith("页面：搜索首页")


def test_build_default_regenerates_when_the_vocabulary_changes(small_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shopsimrl.generate.default as default

    archive = small_dir / "source" / "default_catalog.json.gz"
    assert default._archive_is_current(archive, 7, SMALL)
    monkeypatch.setattr(default, "vocabulary_sha256", lambda: "0" * 64)
    assert not default._archive_is_current(archive, 7, SMALL)


def test_bad_generator_and_stats_arguments_get_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from shopsimrl.cli import main
    from shopsimrl.errors import DataError, ShopSimError

    with raises_kind(DataError, "generator_config", match="--two-axis-products"):  # errors name the flags (issue 18)
        GeneratorConfig(products=10, two_axis_products=20)
    assert issubclass(DataError, ShopSimError)
    assert main(["data", "generate", "--out", "/dev/null/x.json", "--products", "10", "--two-axis-products", "20"]) == 2
    assert "--two-axis-products" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "stats", "somewhere", "--oracle-sample", "-3"])
    assert exit_info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_data_stats_progress_starts_at_zero_and_ends_at_the_total(small_dir: Path) -> None:
    """The bar appears before the first (slow) chunk finishes, for each phase (issue 18 item 7)."""
    events: list[tuple[str, int, int]] = []
    data_statistics(small_dir, oracle_sample=12, workers=1, use_cache=False,
                    progress=lambda label, done, total: events.append((label, done, total)))
    for label, total in (("oracle", 12), ("heuristic", 30)):
        mine = [event for event in events if event[0] == label]
        assert mine[0] == (label, 0, total) and mine[-1] == (label, total, total)
    assert [event[0] for event in events].index("heuristic") > max(
        i for i, event in enumerate(events) if event[0] == "oracle")

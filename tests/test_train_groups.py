"""GRPO group logic: the dynamic-sampling filter, selection with keep-when-insufficient, advantages."""

from __future__ import annotations

import asyncio
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.skills import Skill
from shopsimrl.env import ShopWorld
from shopsimrl.errors import RolloutError
from shopsimrl.train.groups import (
    DROP_UNSCORED,
    DROP_ZERO_SPREAD,
    KEEP,
    UnscoredStreak,
    check_shared_context,
    group_advantages,
    group_decision,
    rollout_step,
    run_group,
    segment_advantages,
    select_groups,
    unique_rewards,
)
from shopsimrl.train.rollout import RolloutContext
from toy import PolicyGenerate, ToyChatTokenizer


def test_advantage_arithmetic() -> None:
    adv = group_advantages({0: 1.0, 1: 0.0, 2: 0.0, 3: 1.0})
    # mean 0.5, unbiased std = sqrt(4 * 0.25 / 3)
    std = math.sqrt(1 / 3)
    assert adv[0] == pytest.approx(0.5 / (std + 1e-6)) and adv[1] == pytest.approx(-0.5 / (std + 1e-6))
    assert group_advantages({0: 1.0, 1: 0.0, 2: 0.0, 3: 1.0}, std_normalization=False) == {
        0: 0.5, 1: -0.5, 2: -0.5, 3: 0.5}
    assert group_advantages({7: 0.8}) == {7: 0.0}  # one rollout: centred only
    assert group_advantages({}) == {}
    zero = group_advantages({0: 0.3, 1: 0.3})
    assert zero == {0: 0.0, 1: 0.0}


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=16))
def test_normalised_advantages_have_zero_mean_and_unit_std(rewards: list[float]) -> None:
    adv = list(group_advantages(dict(enumerate(rewards))).values())
    assert abs(sum(adv)) < 1e-6
    std = statistics.stdev(rewards)
    if std > 1e-3:
        assert statistics.stdev(adv) == pytest.approx(std / (std + 1e-6), rel=1e-6)


def test_segments_count_once_per_rollout() -> None:
    # rollout 0 has three segments, rollout 1 one: the mean is over rollouts (0.5), not segments (0.75)
    out = segment_advantages([0, 0, 0, 1], [1.0, 1.0, 1.0, 0.0], ["g", "g", "g", "g"], std_normalization=False)
    assert out == [0.5, 0.5, 0.5, -0.5]
    two_groups = segment_advantages([0, 1, 2, 3], [1.0, 0.0, 0.2, 0.2], ["a", "a", "b", "b"],
                                    std_normalization=False)
    assert two_groups == [0.5, -0.5, 0.0, 0.0]
    with raises_kind(RolloutError, "group"):
        unique_rewards([(0, 1.0), (0, 0.0)])
    with raises_kind(RolloutError, "group"):
        segment_advantages([0], [1.0, 2.0], ["g"])


def test_filter_decisions() -> None:
    assert group_decision([True, True], {0: 1.0, 1: 0.0}) == KEEP
    assert group_decision([True, True], {0: 0.5, 1: 0.5 + 1e-7}) == DROP_ZERO_SPREAD
    assert group_decision([True, True], {0: 0.5, 1: 0.5 + 1e-5}) == KEEP
    assert group_decision([True, False], {0: 1.0, 1: 0.0}) == DROP_UNSCORED


def test_selection_keeps_zero_spread_only_when_short() -> None:
    groups = list("abcdefg")
    decisions = [KEEP, DROP_ZERO_SPREAD, DROP_UNSCORED, KEEP, DROP_ZERO_SPREAD, KEEP, DROP_ZERO_SPREAD]
    enough = select_groups(groups, decisions, target=2)
    assert enough.kept == ["a", "d"] and enough.filled_with_zero_spread == 0
    assert dict(enough.dropped) == {"b": DROP_ZERO_SPREAD, "c": DROP_UNSCORED, "e": DROP_ZERO_SPREAD,
                                    "f": "surplus", "g": DROP_ZERO_SPREAD}
    short = select_groups(groups, decisions, target=5)
    assert short.kept == ["a", "d", "f", "b", "e"] and short.filled_with_zero_spread == 2
    assert ("c", DROP_UNSCORED) in short.dropped and ("g", DROP_ZERO_SPREAD) in short.dropped
    never = select_groups(["x"], [DROP_UNSCORED], target=4)
    assert never.kept == []


def test_unscored_streak_aborts_after_eight() -> None:
    streak = UnscoredStreak()
    for _ in range(7):
        streak.update(DROP_UNSCORED)
    streak.update(KEEP)
    for _ in range(7):
        streak.update(DROP_UNSCORED)
    with raises_kind(RolloutError, "group", match="8 consecutive"):
        streak.update(DROP_UNSCORED)


def test_shared_context_check() -> None:
    skill = Skill("s1", "1", "### 检查规格")
    a = RolloutContext(3, skills=(skill,))
    assert check_shared_context([a, RolloutContext(3, skills=(skill,))]) == a
    with raises_kind(RolloutError, "group"):
        check_shared_context([a, RolloutContext(3)])
    with raises_kind(RolloutError, "group"):
        check_shared_context([])


def test_group_of_eight_shares_one_prompt_and_step_selects(prepared_dir: Path) -> None:
    world = ShopWorld.from_data_dir(prepared_dir)
    tokenizer = ToyChatTokenizer()
    env = InProcessEnvironment(world)
    group = asyncio.run(run_group(RolloutContext(0), tokenizer, PolicyGenerate(tokenizer, make_policy("random", world)),
                                  env, group_index=5, first_rollout_id=40))
    assert len(group.trajectories) == 8
    assert [t.metadata["rollout_id"] for t in group.trajectories] == list(range(40, 48))
    assert {t.metadata["group_index"] for t in group.trajectories} == {5}
    assert len({t.segments[0].tokens[: t.segments[0].prompt_length].__repr__() for t in group.trajectories}) == 1
    ids = world.catalog.split("all")[:4]
    step = asyncio.run(rollout_step([RolloutContext(i) for i in ids], tokenizer,
                                    PolicyGenerate(tokenizer, make_policy("oracle", world)), env,
                                    target_groups=2, n=4))
    # the oracle is deterministic: every group has zero spread, so the batch is filled with them
    assert len(step.groups) == 2 and step.filled_with_zero_spread == 2
    assert all(a == [0.0] * 4 for a in step.advantages)
    assert [reason for _, reason in step.dropped] == [DROP_ZERO_SPREAD, DROP_ZERO_SPREAD]


def test_every_step_carries_a_stable_key_of_its_page(prepared_dir: Path) -> None:
    """Step-level credit (GiGPO-style): steps standing on the same page share a key across a group's rollouts,
    different pages get different keys, and the key ignores how the page was reached (``last_action``)."""
    from collections import defaultdict

    from shopsimrl.train.step_keys import state_key

    world = ShopWorld.from_data_dir(prepared_dir)
    tokenizer = ToyChatTokenizer()
    group = asyncio.run(run_group(RolloutContext(0), tokenizer, PolicyGenerate(tokenizer, make_policy("random", world)),
                                  InProcessEnvironment(world), n=4))
    # the docs/training.md example: group the steps of a group's rollouts by the page they acted on
    by_state: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r, trajectory in enumerate(group.trajectories):
        for step in trajectory.steps:
            by_state[step["state_key"]].append((r, step["step_index"]))
    first = {t.steps[0]["state_key"] for t in group.trajectories}
    assert len(first) == 1 and len(by_state[first.pop()]) >= 4  # every rollout starts on the same home page
    assert len(by_state) > 1 and all(len(k) == 16 for k in by_state)
    env = world.new_env()
    page = env.reset(0)["observation_state"]
    again = env.step("search[小吃车]")["observation_state"]
    assert state_key(page) != state_key(again)
    assert state_key({**again, "last_action": {"action": "click[x]"}}) == state_key(again)
    assert state_key(dict(reversed(list(again.items())))) == state_key(again)  # key order does not matter


def test_step_groups_key_pages_by_group_across_every_adapters_export_format() -> None:
    """GiGPO step groups from exported rows: verl's space-separated keys and TRL's / slime's lists read the same;
    identical pages of siblings share a group, the same page in another GRPO group does not."""
    from shopsimrl.errors import ShopSimError
    from shopsimrl.train.step_keys import join_keys, model_turn_keys, split_keys, step_groups

    steps = [{"state_key": "a", "sampled_tokens": 3}, {"state_key": "b", "context_overflow": 9},
             {"state_key": "c", "sampled_tokens": 1}]
    assert model_turn_keys(steps) == ["a", "c"]  # the overflow step sampled nothing
    assert split_keys(join_keys(["a", "c"])) == ["a", "c"] == split_keys(("a", "c"))
    assert split_keys(None) == [] and split_keys("") == []
    groups = step_groups(["g", "g", "h"], ["a c", ["a", "d"], "a"])
    assert groups == {("g", "a"): [(0, 0), (1, 0)], ("g", "c"): [(0, 1)], ("g", "d"): [(1, 1)], ("h", "a"): [(2, 0)]}
    with pytest.raises(ShopSimError, match="2 group ids for 1 rows"):
        step_groups(["g", "g"], ["a"])


def test_verl_manager_health_from_turn_counts_without_verl() -> None:
    from shopsimrl.train.health import ALARM_KEY, RATE_KEY
    from shopsimrl.train.verl_manager import health_metrics

    assert health_metrics({}) == {}
    assert health_metrics({"shopsim_turns": [2, 3], "shopsim_protocol_errors": [2, 3]}) == {RATE_KEY: 1.0, ALARM_KEY: 1.0}
    assert health_metrics({"shopsim_turns": [4, 0], "shopsim_protocol_errors": [1, 0]}) == {RATE_KEY: 0.25, ALARM_KEY: 0.0}

"""The episode shell (``agent/episode_shell.py``) and the task-row codec (``train/row_codec.py``).

The shell holds the loop's rules for externally driven episodes: the same turn limit as the loop (a cap only
lowers it), the end recorded once, one answer after the end, public reward fields only. Its OpenEnv and
verifiers paths are checked in their own venvs (``test_openenv.py``, ``test_verifiers.py``); here the shell
itself and TRL's environment class, over every task of the fixture catalog. The codec: every adapter's row
builds and parses back (a hypothesis property), and a bad task id is refused by the contract's one check."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.agent.episode import EpisodeRequest, turn_limit
from shopsimrl.agent.episode_shell import EPISODE_OVER, EpisodeShell, public_reward
from shopsimrl.agent.play import play
from shopsimrl.agent.policies import make_policy
from shopsimrl.contract import MULTI_TURN, SINGLE_TURN
from shopsimrl.dialogue import SHOPPER_NAMES
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.errors import AdapterError, EpisodeStateError
from shopsimrl.train import row_codec
from shopsimrl.train.row_codec import TaskRow
from shopsimrl.train.trl_environment import ShopDialogueToolEnvironment, ShopToolEnvironment, environment_rows
from shopsimrl.versions import EPISODE_LIMITS, REPORTED_METRICS

SRC = Path(__file__).resolve().parents[1] / "src" / "shopsimrl"
NOT_AN_ACTION = "click[no such button]"  # an invalid action: counted, never ends the episode by itself


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


def _row(task: int, shopper: str | None = None) -> dict[str, Any]:
    return {k: v[0] for k, v in environment_rows([task], shopper=shopper).items()}


def _call(env: Any, action: str) -> str:
    name, _, value = action.partition("[")
    return str(getattr(env, name)(value[:-1]))


# ------------------------------------------------------------------------------- the turn limit
@pytest.mark.parametrize("mode", [SINGLE_TURN, MULTI_TURN])
@pytest.mark.parametrize("cap", [None, *range(0, 61)])
def test_the_shell_limit_is_the_loops_and_a_cap_only_lowers_it(mode: str, cap: int | None) -> None:
    shell = EpisodeShell(None, {"interaction_mode": mode}, max_steps=cap)
    own = EPISODE_LIMITS[mode]
    assert shell.limit == (own if cap is None else min(own, cap)) == turn_limit(mode, cap)
    reset = {"interaction_mode": mode}
    assert shell.limit == EpisodeRequest(0, interaction_mode=mode, max_turns=cap).turn_limit(reset)


@pytest.mark.parametrize("cap", [None, 0, 1, 3, 29, 30, 31, 100])
def test_trl_environment_ends_at_the_lowered_limit_never_a_raised_one(world: ShopWorld, cap: int | None) -> None:
    """``max_steps`` above the episode's own 30 used to raise the class's limit (``max_steps or limit``)."""
    task = world.catalog.split("all")[0]
    env = ShopToolEnvironment(world, max_steps=cap)
    env.reset(**_row(task))
    limit = 30 if cap is None else min(30, cap)
    assert env._shell is not None and env._shell.limit == limit
    answers = [env.click("no such button") for _ in range(limit + 2)]
    assert all(a != EPISODE_OVER for a in answers[:limit]) and answers[limit:] == [EPISODE_OVER] * 2
    assert env.get_reward() == 0.0 and env._shell.termination_reason == "action_limit"
    assert env._shell.steps == limit


def test_a_bad_cap_is_a_typed_error(world: ShopWorld) -> None:
    for cap in (-1, True, 2.5, "3"):
        with pytest.raises(AdapterError, match="max_steps"):
            ShopToolEnvironment(world, max_steps=cap)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- the same episode on every path
def _loop_episodes(world: ShopWorld) -> list[tuple[int, str | None, list[str], list[str], dict[str, Any]]]:
    """(task, shopper, actions, observations, final) of the loop's own episodes: every task, two policies,
    dialogue episodes with the rule shopper."""
    out = []
    env = world.new_env(shoppers=shopper_registry())
    for policy, shopper in (("heuristic", None), ("random", None), ("dialogue-heuristic", "rule")):
        chosen = make_policy(policy, world)
        for task in world.catalog.split("all"):
            episode, hooks = play(env, chosen, EpisodeRequest(task, shopper=shopper), seed=task)
            assert episode.final is not None
            out.append((task, shopper, [t.action for t in hooks.history], [t.observation for t in hooks.history],
                        episode.final))
    env.close()
    return out


def test_trl_environment_replays_the_loops_episodes_exactly(world: ShopWorld) -> None:
    for task, shopper, actions, observations, final in _loop_episodes(world):
        env = (ShopDialogueToolEnvironment if shopper else ShopToolEnvironment)(world)
        env.reset(**_row(task, shopper))
        assert [_call(env, a) for a in actions] == observations
        assert _call(env, "search[after the end]") == EPISODE_OVER
        assert env.get_reward() == final["reward"] == final["reward_detail"]["r_strict"]
        assert env._shell is not None and env._shell.termination_reason == final["termination_reason"]
        assert env._shell.public == public_reward(final["reward_detail"])
        assert set(env._shell.outcome()["reward_detail"]) <= set(REPORTED_METRICS)


def test_a_step_after_the_end_is_the_engines_error_and_a_call_is_the_one_message(world: ShopWorld) -> None:
    env = world.new_env(shoppers=shopper_registry())
    shell = EpisodeShell(env, env.reset(world.catalog.split("all")[0]), max_steps=1)
    shell.step(NOT_AN_ACTION)
    assert shell.done and shell.final is not None and shell.final["termination_reason"] == "action_limit"
    with raises_kind(EpisodeStateError, "episode_terminated"):
        shell.step(NOT_AN_ACTION)
    assert shell.call(NOT_AN_ACTION) == EPISODE_OVER == EpisodeShell.ended().call(NOT_AN_ACTION)
    assert shell.steps == 1 and shell.finish() is shell.final


# ------------------------------------------------------------------------------- the task-row codec
rows = st.builds(TaskRow, task_id=st.integers(0, 10**12), shopper=st.sampled_from([None, *SHOPPER_NAMES]),
                 split=st.sampled_from(["train", "val", "test", "all"]),
                 difficulty=st.one_of(st.none(), st.sampled_from(["first", "heuristic", "strong", "none"])))


def _column_row(columns: dict[str, list[Any]]) -> dict[str, Any]:
    return {k: v[0] for k, v in columns.items()}


@settings(max_examples=300, deadline=None)
@given(rows, st.text(max_size=40))
def test_every_adapters_row_parses_back_to_what_was_built(row: TaskRow, instruction: str) -> None:
    bare = TaskRow(row.task_id, row.shopper)
    assert row_codec.parse_prompt(row_codec.prompt_text(row)) == bare
    assert row_codec.parse_prompt([{"role": "user", "content": row_codec.prompt_text(row)}]) == bare
    columns = row_codec.prompt_columns([row], difficulty=True)
    assert row_codec.parse_prompt(columns["prompt"][0]) == bare and columns["difficulty"] == [row.difficulty]
    env_row = _column_row(row_codec.environment_columns([row], "system", dialogue=row.shopper is not None))
    assert row_codec.parse_environment_row(env_row) == bare
    assert row_codec.parse_verl_row(row_codec.verl_row(row, instruction)) == row
    line = row_codec.slime_line(row)
    assert row_codec.parse_slime_sample(SimpleNamespace(**line)) == row
    no_meta_id = {**line["metadata"]}
    del no_meta_id["task_id"]
    assert row_codec.parse_slime_sample(SimpleNamespace(prompt=line["prompt"], metadata=no_meta_id)) == row


bad_ids = st.one_of(st.booleans(), st.floats(allow_nan=True), st.none(), st.text(max_size=8),
                    st.lists(st.integers(), max_size=2), st.integers().map(str), st.sampled_from([True, 1.0, "1"]))


@settings(max_examples=300, deadline=None)
@given(bad_ids)
def test_a_task_id_field_that_is_not_an_int_is_refused_with_the_typed_error(bad: object) -> None:
    parsers = [
        lambda: row_codec.parse_verl_row({"extra_info": {"task_id": bad}}),
        lambda: row_codec.parse_verl_row({"task_id": bad}),
        lambda: row_codec.parse_slime_sample(SimpleNamespace(prompt="3", metadata={"task_id": bad})),
        lambda: row_codec.parse_environment_row({"task_id": bad}),
        lambda: row_codec.rows_of([bad]),
    ]
    for parse in parsers:
        with pytest.raises(AdapterError, match="not a task id"):
            parse()


decimal = re.compile(r"\s*[0-9]+\s*")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=8), st.sampled_from(["True", "1.0", "+1", "1_0", "-1", "١", " ", "0x1", "0\x1f"])))
def test_a_task_id_text_that_is_not_a_decimal_number_is_refused(text: str) -> None:
    if decimal.fullmatch(text):
        assert row_codec.parse_prompt(text).task_id == int(text.strip())  # str.strip, as the codec: int() keeps \x1c-\x1f
        return
    for parse in (lambda: row_codec.parse_prompt(text), lambda: row_codec.parse_prompt(f"{text}@rule"),
                  lambda: row_codec.parse_slime_sample(SimpleNamespace(prompt=text, metadata={}))):
        with pytest.raises(AdapterError, match="not a task id"):
            parse()


def test_a_bad_shopper_is_refused_with_the_typed_error() -> None:
    for parse in (lambda: row_codec.parse_prompt("3@oracle"),
                  lambda: row_codec.parse_verl_row({"extra_info": {"task_id": 3, "shopper": "oracle"}}),
                  lambda: row_codec.parse_slime_sample(SimpleNamespace(prompt="3", metadata={"shopper": 1})),
                  lambda: row_codec.parse_environment_row({"task_id": 3, "shopper": "x"}),
                  lambda: row_codec.rows_of([3], shopper="oracle")):
        with pytest.raises(AdapterError, match="unknown shopper"):
            parse()


def test_the_task_id_rule_is_written_once() -> None:
    """``is_task_id`` (an ``int``, not a ``bool``) is spelled in the contract only; no module spells it again and
    no adapter reads a task id with ``int()``, which accepts ``True``, ``1.0`` and ``"1"``."""
    rule = re.compile(r"isinstance\(\w*task\w*, bool\)|not isinstance\(\w*task\w*, int\) or isinstance")
    assert [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if rule.search(p.read_text("utf-8"))] == []
    assert "isinstance(value, int) and not isinstance(value, bool)" in (SRC / "contract.py").read_text("utf-8")
    adapters = ["train/trl.py", "train/verl.py", "train/slime.py", "train/trl_environment.py", "train/row_codec.py",
                "openenv/harness.py"]
    for name in adapters:
        assert not re.search(r"int\((raw|task|str\(task)", (SRC / name).read_text("utf-8")), name

"""The policy registry (agent/policies): every registered policy, not a named list, is built, named, offered by
``eval --policy`` and ``policy-server --policy``, and plays a whole evaluation from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shopsimrl.agent.builtin_backend import BuiltinPolicyModel, policy_label
from shopsimrl.agent.policies import POLICY_NAMES, REGISTRY, make_policy, policy_spec
from shopsimrl.agent.policy import PolicyError
from shopsimrl.agent.policy_server import create_policy_app
from shopsimrl.cli import build_parser, main
from shopsimrl.env import ShopWorld


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


def test_the_registry_is_the_one_list_of_built_in_policies() -> None:
    assert tuple(REGISTRY) == POLICY_NAMES and {"strong", "first"} <= set(POLICY_NAMES)
    parser = build_parser()
    for name in POLICY_NAMES:
        assert parser.parse_args(["eval", "--data", "d", "--policy", name]).policy == name
        assert parser.parse_args(["policy-server", "--data", "d", "--policy", name]).policy == name
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "--data", "d", "--policy", "genius"])
    with pytest.raises(PolicyError, match="unknown policy"):
        policy_spec("genius")


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_registered_policy_evaluates_from_the_command_line(name: str, world: ShopWorld, prepared_dir: Path,
                                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    spec = REGISTRY[name]
    if spec.catalog_bound:  # trained weights are bound to their catalog: train a few episodes on this one
        from shopsimrl.agent.policies.learned import WEIGHTS_ENV
        from shopsimrl.train.policy_gradient import PolicyTrainConfig, train

        train(world, PolicyTrainConfig(episodes=16, groups_per_update=1, eval_every=0)).model.save(tmp_path / "w.json")
        monkeypatch.setenv(WEIGHTS_ENV, str(tmp_path / "w.json"))
    policy = make_policy(name, world)
    assert policy.name == name and BuiltinPolicyModel(policy).identity()["label"] == policy_label(name) == spec.label
    create_policy_app(world, policy=name)  # the policy server builds it too
    out = tmp_path / name
    dialogue = ["--shopper", "rule"] if spec.dialogue else []
    assert main(["eval", "--data", str(prepared_dir), "--split", "test", "--limit", "2", "--policy", name, *dialogue,
                 "--out", str(out), "--no-progress", "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert ("not a baseline" in printed) == spec.private_goal
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["counts"]["completed"] == summary["counts"]["requested"] == 2
    if spec.private_goal:  # the oracles are solvability checks: they solve every task
        assert all(json.loads(line)["final"]["reward_detail"]["r_success"] == 1
                   for line in (out / "traces.jsonl").read_text("utf-8").splitlines())

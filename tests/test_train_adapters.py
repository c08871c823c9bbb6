"""Adapter contracts: slime generate/filter/post-process with a stand-in Sample, verl agent loop with stubs."""

from __future__ import annotations

import asyncio
import importlib
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.runtime import InProcessEnvironment
from shopsimrl.env.shop_env import ShopWorld
from shopsimrl.train import slime as slime_adapter
from shopsimrl.train import verl as verl_adapter
from shopsimrl.train.toy import PolicyGenerate, ToyChatTokenizer


@dataclass
class Sample:
    """slime's ``Sample`` field names (slime itself needs a GPU stack and is not on PyPI)."""

    group_index: int | None = None
    index: int | None = None
    prompt: str = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: Any = None
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)


ARGS = SimpleNamespace(partial_rollout=False, group_rm=False, shopsim_max_steps=30, rollout_max_context_len=None,
                       grpo_std_normalization=True)
SAMPLING = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "max_new_tokens": 4096}


@pytest.fixture()
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture()
def slime_env(world: ShopWorld):
    tokenizer = ToyChatTokenizer()
    policy = {"name": "oracle"}
    slime_adapter.configure(
        tokenizer=lambda args: tokenizer,
        backend=lambda args, params: PolicyGenerate(tokenizer, make_policy(policy["name"], world)),
        environment=lambda args: InProcessEnvironment(world),
    )
    yield tokenizer, policy
    slime_adapter.configure(tokenizer=None, backend=None, environment=None)


def _sample(task: int, group: int = 0, index: int = 0, split: str = "train") -> Sample:
    line = slime_adapter.task_lines([task], split)[0]
    return Sample(group_index=group, index=index, prompt=line["prompt"], metadata=dict(line["metadata"]))


def test_slime_generate_returns_trainable_samples(slime_env) -> None:
    tokenizer, _ = slime_env
    out = asyncio.run(slime_adapter.generate(ARGS, _sample(0, index=3), dict(SAMPLING)))
    samples = out if isinstance(out, list) else [out]
    assert len(samples) == 4  # tools in the prompt change every page: one segment per turn
    for k, s in enumerate(samples):
        assert isinstance(s, Sample) and s.status is Sample.Status.COMPLETED
        assert len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length
        assert s.tokens[len(s.tokens) - s.response_length:] == tokenizer.encode(s.response)
        assert s.reward["reward"] == s.reward["r_strict"] == 1.0
        assert s.metadata["rollout_id"] == 3 and s.metadata["segment"] == k and s.metadata["shopsim_scored"]
        assert sum(s.loss_mask) > 0 and not s.remove_sample


def test_slime_unscored_episode_is_a_removed_placeholder(slime_env, world: ShopWorld) -> None:
    slime_adapter.configure(backend=lambda args, params: (lambda ids: (_ for _ in ()).throw(OSError("sglang down"))))
    out = asyncio.run(slime_adapter.generate(ARGS, _sample(0), dict(SAMPLING)))
    assert out.tokens == [0, 0] and out.loss_mask == [0] and out.remove_sample
    assert out.status is Sample.Status.ABORTED and out.metadata["shopsim_scored"] is False
    assert out.metadata["shopsim_error"]["type"] == "OSError"


@pytest.mark.parametrize("args, params, sample, message", [
    ({"partial_rollout": True}, {}, {}, "partial rollout"),
    ({"group_rm": True}, {}, {}, "group-rm"),
    ({}, {"top_p": 0.95}, {}, "top_p"),
    ({}, {"top_k": 20}, {}, "top_k"),
    ({}, {}, {"split": "test"}, "only train"),
])
def test_slime_guards(slime_env, args, params, sample, message) -> None:
    a = SimpleNamespace(**{**vars(ARGS), **args})
    s = _sample(0, split=sample.get("split", "train"))
    with pytest.raises(slime_adapter.SlimeAdapterError, match=message):
        asyncio.run(slime_adapter.generate(a, s, {**SAMPLING, **params}))


def test_slime_filter_and_advantages_count_rollouts_once(slime_env) -> None:
    _, policy = slime_env

    def group(name: str, g: int) -> list[Any]:
        policy["name"] = name
        return [asyncio.run(slime_adapter.generate(ARGS, _sample(i % 4, group=g, index=8 * g + i), dict(SAMPLING)))
                for i in range(4)]

    oracle = group("oracle", 0)  # tasks 0..3: rewards 1, 1, 1, 0 → spread
    out = slime_adapter.fully_scored_group_filter(ARGS, oracle)
    assert out.keep and out.reason is None
    same = [asyncio.run(slime_adapter.generate(ARGS, _sample(0, group=1, index=8 + i), dict(SAMPLING)))
            for i in range(3)]
    zero = slime_adapter.fully_scored_group_filter(ARGS, same)
    assert not zero.keep and zero.reason == slime_adapter.DROP_ZERO_SPREAD
    flat = [s for item in oracle for s in (item if isinstance(item, list) else [item])]
    raw, adv = slime_adapter.normalize_grpo_by_prompt_and_rollout(ARGS, flat)
    assert len(raw) == len(adv) == len(flat)
    per_rollout = {s.metadata["rollout_id"]: a for s, a in zip(flat, adv, strict=True)}
    # mean over 4 unique rollouts (0.75), not over the segments; segments of a rollout share its advantage
    assert all(per_rollout[s.metadata["rollout_id"]] == a for s, a in zip(flat, adv, strict=True))
    assert sum(per_rollout.values()) == pytest.approx(0.0, abs=1e-9)
    bad = [*oracle[:3], slime_adapter.to_samples(_sample(3, index=3), _aborted(), None)[0]]
    assert slime_adapter.fully_scored_group_filter(ARGS, bad).reason == slime_adapter.DROP_UNSCORED


def _aborted():
    from shopsimrl.train.rollout import ABORTED, Trajectory

    return Trajectory(3, ABORTED, [], 0.0, None, [], [], [], {}, {"stage": "reset", "type": "X", "message": ""})


@pytest.mark.parametrize("module, attribute, hint", [
    ("shopsimrl.train.verl", "ShopAgentLoop", "verl is not installed"),
])
def test_adapters_import_without_trainer_and_say_what_to_install(monkeypatch, module, attribute, hint) -> None:
    monkeypatch.setitem(sys.modules, "verl", None)  # make `import verl` fail even if it were installed
    mod = importlib.import_module(module)
    mod._CACHE.clear()
    with pytest.raises(verl_adapter.VerlAdapterError, match=hint):
        getattr(mod, attribute)


def test_slime_without_slime_names_the_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "slime", None)
    slime_adapter.configure(tokenizer=None)
    with pytest.raises(slime_adapter.SlimeAdapterError, match="slime is not installed"):
        asyncio.run(slime_adapter.generate(ARGS, _sample(0), dict(SAMPLING)))

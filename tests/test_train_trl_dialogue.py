"""Dialogue mode (issue 16) through the TRL adapter, with TRL 1.16's own code: ``rollout_func`` prompts that carry
the shopper, ``GRPOTrainer`` training on them, and the ``environment_factory`` class with ``ask_user``.

What every test checks: the first user message is the shopper's opening (the instruction never reaches the
model), every ``ask_user`` result (the shopper's reply) has ``env_mask`` 0 while the agent's questions have 1,
and the episode is scored with the environment's ``r_strict``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the train extra (torch, transformers, trl, datasets) is not installed")

import trl

from dialogue_support import REPLY_MARK, check_split, opening, questions, reference, replies
from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.prompt import SYSTEM_PROMPT, first_user_message
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.errors import ShopSimError
from shopsimrl.testing.scripted import TemplatePolicyGenerate
from shopsimrl.train import trl as trl_adapter
from shopsimrl.train.bpe_tokenizer import build_bpe_tokenizer
from shopsimrl.train.chat_template import episode_tools
from shopsimrl.train.rollout import COMPLETED, RolloutConfig, Trajectory, TurnRequest
from shopsimrl.train.trl_environment import ShopDialogueToolEnvironment, ShopToolEnvironment, environment_rows

QWEN25 = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def tokenizer(prepared_dir: Path) -> Any:
    products = json.loads(gzip.decompress((prepared_dir / "products.json.gz").read_bytes()))
    return build_bpe_tokenizer([SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)],
                               vocab_size=2000, chat_template=QWEN25)


def check_masked_dialogue(world: ShopWorld, tokenizer: Any, trajectory: Trajectory, prompt_ids: list[int],
                          completion: list[int], mask: list[int]) -> None:
    """The TRL row of one dialogue episode: opening first, replies at mask 0, questions at mask 1."""
    start, observation, instruction = opening(world, trajectory.task_id)
    assert trajectory.messages[1] == {"role": "user", "content": first_user_message(start, observation)}
    prompt_text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
    assert start in prompt_text and instruction not in prompt_text
    assert len(completion) == len(mask)
    trained = tokenizer.decode([t for t, m in zip(completion, mask, strict=True) if m], skip_special_tokens=False)
    untrained = tokenizer.decode([t for t, m in zip(completion, mask, strict=True) if not m],
                                 skip_special_tokens=False)
    check_split(trained, untrained, questions([s["action"] for s in trajectory.steps]), replies(trajectory.messages))


def test_task_prompts_carry_the_shopper_and_bad_ones_are_typed_errors() -> None:
    rows = trl_adapter.task_prompts([3, 5], shopper="rule")
    assert rows["prompt"] == ["3@rule", "5@rule"] and rows["shopper"] == ["rule", "rule"]
    assert trl_adapter.task_prompts([3])["prompt"] == ["3"]
    with pytest.raises(ShopSimError, match="unknown shopper"):
        trl_adapter.task_prompts([3], shopper="oracle")
    with pytest.raises(trl_adapter.AdapterError, match="not a task id"):
        asyncio.run(trl_adapter.run_episodes(["3@nobody"], None, lambda ids: None, None, RolloutConfig()))


def test_dialogue_prompts_play_the_shopper_and_mask_its_replies(world: ShopWorld, tokenizer: Any) -> None:
    tasks = world.catalog.split("all")[:3]
    prompts = trl_adapter.task_prompts(tasks, shopper="rule")["prompt"] + [str(tasks[0])]
    generate = TemplatePolicyGenerate(tokenizer, make_policy("dialogue-heuristic", world),
                                      tools=episode_tools(dialogue=True))
    trajectories = asyncio.run(trl_adapter.run_episodes(
        prompts, tokenizer, generate, InProcessEnvironment(world), RolloutConfig(mode="append"), concurrency=1))
    out = trl_adapter.trajectories_to_trl(trajectories, tokenizer)
    for i, trajectory in enumerate(trajectories[:3]):
        assert trajectory.status == COMPLETED, trajectory.error
        expected = reference(world, trajectory.task_id, "dialogue-heuristic")
        assert [s["action"] for s in trajectory.steps] == [s["action"] for s in expected["steps"]]
        assert trajectory.reward == trajectory.reward_detail["r_strict"] == out["shop_reward"][i] \
            == expected["final"]["reward"]
        check_masked_dialogue(world, tokenizer, trajectory, out["prompt_ids"][i], out["completion_ids"][i],
                              out["env_mask"][i])
        assert all(lp == 0.0 for lp, m in zip(out["logprobs"][i], out["env_mask"][i], strict=True) if not m)
    # the same task without a shopper: the instruction, no ask_user tool rendered, no question asked
    single = trajectories[3]
    assert single.messages[1]["content"].split("\n")[1] == world.new_env(shoppers=shopper_registry()).reset(tasks[0])["task_instruction"]
    assert '"ask_user"' not in tokenizer.decode(out["prompt_ids"][3], skip_special_tokens=False)
    assert not any((s["action"] or "").startswith("ask_user[") for s in single.steps)


class MixedDialogueGenerate(TemplatePolicyGenerate):
    """Episodes alternate (by first appearance) between the dialogue heuristic and the random policy."""

    def __init__(self, tokenizer: Any, world: ShopWorld) -> None:
        super().__init__(tokenizer, make_policy("dialogue-heuristic", world), tools=episode_tools(dialogue=True))
        self.oracle, self.random = self.policy, make_policy("random", world)
        self.episodes: dict[int, int] = {}

    def text_for(self, request: TurnRequest) -> str:
        index = self.episodes.setdefault(id(request.messages), len(self.episodes))
        self.policy = self.oracle if index % 2 == 0 else self.random
        return super().text_for(request)


@pytest.mark.slow
def test_grpo_trainer_trains_on_dialogue_episodes(world: ShopWorld, tokenizer: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32768,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None))
    before = [p.detach().clone() for p in model.parameters()]
    tasks = world.catalog.split("all")[:2]
    dataset = datasets.Dataset.from_dict(trl_adapter.task_prompts(tasks, shopper="rule"))
    seen: list[tuple[list[Any], dict[str, Any], list[Trajectory]]] = []
    episodes: list[Trajectory] = []
    original = trl_adapter.run_episodes

    async def recording(*args: Any, **kwargs: Any) -> list[Trajectory]:
        result = await original(*args, **kwargs)
        episodes.extend(result)
        return result

    monkeypatch.setattr(trl_adapter, "run_episodes", recording)
    inner = trl_adapter.make_rollout_func(InProcessEnvironment(world), concurrency=1,
                                          generate_factory=lambda trainer: MixedDialogueGenerate(tokenizer, world))

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        episodes.clear()
        out = inner(prompts, trainer)
        seen.append((list(prompts), out, list(episodes)))
        return out

    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                      max_steps=1, learning_rate=1e-2, beta=0.0, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", max_completion_length=16384, seed=0, dataloader_num_workers=0, bf16=False)
    trainer = GRPOTrainer(model=model, reward_funcs=trl_adapter.shop_reward, args=args, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func)
    trainer.train()
    assert trainer.state.global_step == 1 and seen
    rewards = []
    for prompts, out, trajectories in seen:
        assert all(str(p).endswith("@rule") for p in prompts) and len(trajectories) == len(prompts)
        for i, trajectory in enumerate(trajectories):
            assert trajectory.scored and out["shop_reward"][i] == trajectory.reward_detail["r_strict"]
            rewards.append(trajectory.reward)
            if any((s["action"] or "").startswith("ask_user[") for s in trajectory.steps):  # the heuristic's
                assert trajectory.reward == reference(world, trajectory.task_id, "dialogue-heuristic")["final"]["reward"]
                check_masked_dialogue(world, tokenizer, trajectory, out["prompt_ids"][i], out["completion_ids"][i],
                                      out["env_mask"][i])
    assert len(rewards) == 4 and len(set(rewards)) > 1
    logs = trainer.state.log_history
    assert all(math.isfinite(h["loss"]) for h in logs if "loss" in h)
    assert any(h.get("shop/turns_mean", 0) > 2 for h in logs)  # questions are turns
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed  # the optimizer stepped on the masked dialogue sequences


def test_dialogue_tool_environment_plays_the_shopper(world: ShopWorld) -> None:
    from transformers.utils import get_json_schema

    task = world.catalog.split("all")[0]
    start, observation, instruction = opening(world, task)
    env = ShopDialogueToolEnvironment(world)
    first = env.reset(**{k: v[0] for k, v in environment_rows([task], shopper="rule").items()})
    assert first.endswith(first_user_message(start, observation)) and instruction not in first
    reply = env.ask_user("你的预算是多少？")
    assert REPLY_MARK in reply and instruction not in reply
    # the tool's schema (what TRL renders) is the environment's ask_user tool, not a second definition
    schema = get_json_schema(ShopDialogueToolEnvironment.ask_user)["function"]
    (ask,) = [t["function"] for t in episode_tools(dialogue=True) if t["function"]["name"] == "ask_user"]
    assert schema["description"] == ask["description"]
    assert schema["parameters"]["properties"]["question"]["description"] == \
        ask["parameters"]["properties"]["question"]["description"]
    assert schema["parameters"]["required"] == ["question"]
    # the oracle's dialogue, replayed through the tools, buys the gold item
    record = reference(world, task, "dialogue-oracle")
    env.reset(task_id=task, shopper="rule")
    for step in record["steps"]:
        name, value = step["action"][:-1].split("[", 1)
        getattr(env, name)(value)
    assert env.get_reward() == record["final"]["reward"] == 1.0
    # a dialogue row on the single-turn class is refused (it has no ask_user tool)
    with pytest.raises(ShopSimError, match="ShopDialogueToolEnvironment"):
        ShopToolEnvironment(world).reset(task_id=task, shopper="rule")


@pytest.mark.slow
def test_dialogue_tool_environment_meets_trls_environment_factory_contract(world: ShopWorld, tokenizer: Any,
                                                                           tmp_path: Path) -> None:
    """TRL builds the dialogue class's tools (``ask_user`` among them), resets it with each row's columns (the
    ``shopper`` column included), and takes ``get_reward`` as the reward source."""
    import datasets
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    resets: list[dict[str, Any]] = []

    class Recording(ShopDialogueToolEnvironment):
        def reset(self, **row: Any) -> str:
            text = super().reset(**row)
            resets.append({"row": dict(row), "text": text})
            return text

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32768,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None))
    tasks = world.catalog.split("all")[:2]
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                      max_steps=1, learning_rate=1e-2, beta=0.0, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", max_completion_length=8, seed=0, dataloader_num_workers=0, bf16=False)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer,
                          train_dataset=datasets.Dataset.from_dict(environment_rows(tasks, shopper="rule")),
                          environment_factory=Recording.factory(world))
    assert sorted(t.__name__ for t in trainer._env_tools[None]) == ["ask_user", "click", "search"]
    trainer.train()
    assert resets and all(r["row"]["shopper"] == "rule" for r in resets)
    for r in resets:
        start, observation, instruction = opening(world, r["row"]["task_id"])
        assert r["text"].endswith(first_user_message(start, observation)) and instruction not in r["text"]
    assert any("rewards/Recording/mean" in h for h in trainer.state.log_history)

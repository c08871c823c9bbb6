"""TRL GRPOTrainer end to end on CPU: a tiny random causal LM, a locally built tokenizer, the shop environment."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the train extra (torch, transformers, trl, datasets) is not installed")

from shopsimrl.agent.runtime import InProcessEnvironment
from shopsimrl.env.shop_env import ShopWorld
from shopsimrl.train import trl as trl_adapter


@pytest.mark.slow
def test_grpo_trainer_takes_two_steps_on_environment_rewards(prepared_dir: Path, tmp_path: Path) -> None:
    import datasets
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from shopsimrl.agent.prompt import SYSTEM_PROMPT
    from shopsimrl.train.tiny_hf import build_tokenizer

    world = ShopWorld.from_data_dir(prepared_dir)
    catalog_text = (prepared_dir / "products.json.gz").read_bytes()
    import gzip

    tokenizer = build_tokenizer([SYSTEM_PROMPT, gzip.decompress(catalog_text).decode("utf-8")])
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None))
    ids = world.catalog.split("all")[:2]
    dataset = datasets.Dataset.from_dict({"prompt": [str(t) for t in ids] * 2})
    seen: list[dict] = []
    inner = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_new_tokens=12, max_steps=2)

    def rollout_func(prompts, trainer):
        out = inner(prompts, trainer)
        seen.append(out)
        return out

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=2,
        learning_rate=1e-3, beta=0.0, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
        max_completion_length=4096, seed=0, dataloader_num_workers=0, bf16=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=trl_adapter.shop_reward, args=args, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func)
    trainer.train()
    assert trainer.state.global_step == 2
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) >= 2 and all(math.isfinite(v) for v in losses)
    # every reward came from the environment: terminal r_strict of a real episode
    assert len(seen) >= 2
    for out in seen:
        assert all(status in ("completed", "truncated") for status in out["shop_status"])
        assert all(r is not None and 0.0 <= r <= 1.0 for r in out["shop_reward"])
        for completion, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
            assert len(completion) == len(mask) == len(lps) and sum(mask) > 0
    rewards = [h for h in trainer.state.log_history if any(k.startswith("rewards/shop_reward") for k in h)]
    assert rewards
    assert all(torch.isfinite(p).all() for p in model.parameters())

"""TRL 1.16 against the real library on CPU: a multi-turn GRPOTrainer run, template failures, the vLLM-style
server generate path over real HTTP, concurrency, and the ``environment_factory`` class."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from error_kinds import raises_kind

pytest.importorskip("trl", reason="the train extra (torch, transformers, trl, datasets) is not installed")

import trl
from fastapi import FastAPI, Request

from live_server import serve
from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.prompt import SYSTEM_PROMPT
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld
from shopsimrl.errors import ModelCallError
from shopsimrl.testing.scripted import TemplatePolicyGenerate
from shopsimrl.train import trl as trl_adapter
from shopsimrl.train.bpe_tokenizer import build_bpe_tokenizer
from shopsimrl.train.rollout import (
    COMPLETED,
    FINISH_ABORT,
    TRUNCATED,
    Generation,
    RolloutConfig,
    TurnRequest,
)
from shopsimrl.train.server_generate import parse_completion, server_generate
from shopsimrl.train.trl_environment import ShopToolEnvironment, environment_rows

QWEN25 = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def corpus(prepared_dir: Path) -> list[str]:
    products = json.loads(gzip.decompress((prepared_dir / "products.json.gz").read_bytes()))
    return [SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)]


def _tiny_model(tokenizer: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32768,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None))


class MixedPolicyGenerate(TemplatePolicyGenerate):
    """Episodes alternate between the oracle and the random policy (by first appearance), so rewards differ."""

    def __init__(self, tokenizer: Any, world: ShopWorld) -> None:
        super().__init__(tokenizer, make_policy("oracle", world))
        self.oracle, self.random = self.policy, make_policy("random", world)
        self.episodes: dict[int, int] = {}

    def text_for(self, request: TurnRequest) -> str:
        index = self.episodes.setdefault(id(request.messages), len(self.episodes))
        self.policy = self.oracle if index % 2 == 0 else self.random
        return super().text_for(request)


def _args(tmp_path: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    base = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=2,
                learning_rate=1e-2, beta=0.0, logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                max_completion_length=16384, seed=0, dataloader_num_workers=0, bf16=False)
    base.update(kw)
    return GRPOConfig(**base)


@pytest.mark.slow
def test_grpo_trainer_trains_on_multi_turn_episodes(world: ShopWorld, corpus: list[str], tmp_path: Path) -> None:
    import datasets
    import torch
    from trl import GRPOTrainer

    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    model = _tiny_model(tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    ids = world.catalog.split("all")[:2]
    dataset = datasets.Dataset.from_dict({"prompt": [str(t) for t in ids]})
    seen: list[dict] = []
    inner = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_steps=8, concurrency=4,
                                          generate_factory=lambda trainer: MixedPolicyGenerate(tokenizer, world))

    prompts_seen: list[list[str]] = []

    def rollout_func(prompts, trainer):
        out = inner(prompts, trainer)
        assert len(out["completion_ids"]) == len(prompts)
        seen.append(out)
        prompts_seen.append(list(prompts))
        return out

    keys_seen: list[list[list[str]]] = []

    def shop_reward(prompts, completions, shop_reward, shop_state_keys, **kwargs):
        keys_seen.append(list(shop_state_keys))  # TRL hands the rollout's extra keys to every reward function
        return trl_adapter.shop_reward(prompts, completions, shop_reward, **kwargs)

    trainer = GRPOTrainer(model=model, reward_funcs=shop_reward, args=_args(tmp_path),
                          train_dataset=dataset, processing_class=tokenizer, rollout_func=rollout_func)
    trainer.train()
    assert trainer.state.global_step == 2 and len(seen) >= 2
    # the health rate and alarm in TRL's own logs at every logged training step
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert steps and all(h["shop/protocol_error_alarm"] == 0.0 and 0.0 <= h["shop/protocol_error_rate"] < 1.0
                         for h in steps)
    # state keys per row, one per model turn; the siblings of a prompt all start on the same page
    from shopsimrl.train.step_keys import step_groups

    for out, keys in zip(seen, keys_seen, strict=False):
        assert keys == out["shop_state_keys"]
        assert [len(k) for k in keys] == [sum(1 for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1]))
                                          for mask in out["env_mask"]]
    for prompts, keys in zip(prompts_seen, keys_seen, strict=False):
        groups = trl_adapter.sibling_groups(prompts, trainer.num_generations)
        by_page = step_groups(groups, keys)
        for g in set(groups):  # every sibling's first turn stands on the group's one start page
            rows = [i for i, x in enumerate(groups) if x == g]
            (first,) = {keys[i][0] for i in rows}
            assert {r for r, t in by_page[(g, first)] if t == 0} == set(rows)
    rewards = [r for out in seen for r in out["shop_reward"]]
    assert all(r is not None for r in rewards) and len(set(rewards)) > 1  # oracle 1.0 vs random
    for out in seen:
        assert all(s in (COMPLETED, TRUNCATED) for s in out["shop_status"])
        for completion, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
            assert len(completion) == len(mask) == len(lps)
            # several sampled turns separated by tool text: 1-runs, then 0-runs (observations), then 1-runs again
            runs = [m for i, m in enumerate(mask) if i == 0 or mask[i - 1] != m]
            assert runs.count(1) >= 2 and 0 in mask
            assert all(lp == 0.0 for lp, m in zip(lps, mask, strict=True) if not m)
    logs = trainer.state.log_history
    assert any(h.get("shop/turns_mean", 0) >= 2 for h in logs)
    assert any(abs(h.get("loss", 0.0)) > 0 or h.get("grad_norm", 0.0) > 0 for h in logs)
    assert all(math.isfinite(h["loss"]) for h in logs if "loss" in h)
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed  # the optimizer really stepped on a non-zero gradient


BROKEN_TEMPLATE = (  # renders the number of messages in the system block: every turn rewrites the prefix
    "<|im_start|>system\n{{ messages | length }}<|im_end|>\n"
    "{% for m in messages %}{% if m.role != 'system' %}<|im_start|>{{ 'user' if m.role == 'tool' else m.role }}\n"
    "{{ m.content or '' }}{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.slow
def test_a_template_failure_stops_training_with_an_error(world: ShopWorld, corpus: list[str],
                                                         tmp_path: Path) -> None:
    import datasets
    from trl import GRPOTrainer

    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=BROKEN_TEMPLATE)
    rollout = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_steps=4,
                                            generate_factory=lambda trainer: MixedPolicyGenerate(tokenizer, world))
    dataset = datasets.Dataset.from_dict({"prompt": [str(t) for t in world.catalog.split("all")[:2]]})
    trainer = GRPOTrainer(model=_tiny_model(tokenizer), reward_funcs=trl_adapter.shop_reward,
                          args=_args(tmp_path, max_steps=1), train_dataset=dataset, processing_class=tokenizer,
                          rollout_func=rollout)
    with pytest.raises(trl_adapter.AdapterError, match="chat template"):
        trainer.train()
    # the metric variant keeps going but says so: every episode aborted, rewards None (excluded), never 0.0
    metric = trl_adapter.make_rollout_func(InProcessEnvironment(world), max_steps=4, on_template_error="metric",
                                           generate_factory=lambda trainer: MixedPolicyGenerate(tokenizer, world))
    out = metric(["0", "0"], trainer)
    assert out["shop_reward"] == [None, None] and out["shop_status"] == ["aborted", "aborted"]
    assert trainer._metrics["train"]["shop/template_errors"][-1] == 2.0


def _trl_example() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "trl" / "train_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_example_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recipe_asks_trl_to_sync_weights_to_its_vllm_server() -> None:
    """The recipe's GPU config parses as TRL's own ``GRPOConfig`` (unknown names raise) with ``use_vllm`` in
    server mode, and TRL's ``_generate`` syncs weights before calling ``rollout_func`` exactly when
    ``use_vllm`` is set (read from TRL's source, so a renamed flag or a moved sync fails here)."""
    import inspect

    from trl import GRPOConfig, GRPOTrainer

    module = _trl_example()
    args = module.parse_args(["--model", "m", "--vllm-server", "http://127.0.0.1:8000/"])
    config = GRPOConfig(**{**module.grpo_config(args), "use_cpu": True, "bf16": False})
    assert config.use_vllm and config.vllm_mode == "server"
    assert config.vllm_server_base_url == "http://127.0.0.1:8000" and config.max_completion_length == 24576
    source = inspect.getsource(GRPOTrainer._generate)
    sync, call = source.index("self.vllm_generation.sync_weights()"), source.index("self.rollout_func(prompts")
    assert sync < call and "if self.use_vllm" in source[:sync]
    plain = module.grpo_config(module.parse_args(["--model", "m"]))
    assert "use_vllm" not in plain  # no server: the trainer's own model samples


def test_unscored_siblings_drop_their_group_in_trls_own_advantage(world: ShopWorld, corpus: list[str],
                                                                   tmp_path: Path) -> None:
    """The rollout function hands every sibling of an aborted episode ``None`` (the unscored-sibling rule);
    TRL's own ``_generate_and_score_completions`` then gives the whole group advantage 0."""
    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    first, second = (str(t) for t in world.catalog.split("all")[:2])

    class AbortThird(MixedPolicyGenerate):
        """The engine aborts the third episode (a sibling of the second group)."""

        def __call__(self, request: TurnRequest) -> Any:
            index = self.episodes.setdefault(id(request.messages), len(self.episodes))
            return Generation([1], [0.0], FINISH_ABORT) if index == 2 else super().__call__(request)

    def make(concurrency: int = 1) -> Any:
        return trl_adapter.make_rollout_func(InProcessEnvironment(world), max_steps=8, concurrency=concurrency,
                                             generate_factory=lambda trainer: AbortThird(tokenizer, world))

    prompts = [first, first, second, second]
    out = make()(prompts, type("T", (), {"processing_class": tokenizer, "num_generations": 2})())
    assert out["shop_status"][2] == "aborted" and out["shop_status"][3] != "aborted"
    assert out["shop_reward"][2:] == [None, None]  # the scored sibling is dropped with its group
    assert all(isinstance(r, float) for r in out["shop_reward"][:2])
    assert trl_adapter.sibling_groups(["a", "a", "b", "b"], 2) == [0, 0, 1, 1]
    assert trl_adapter.sibling_groups(["a", "a", "b"], 2) == [0, 0, 1]

    import datasets
    from trl import GRPOTrainer

    dataset = datasets.Dataset.from_dict({"prompt": [first, second]})
    trainer = GRPOTrainer(model=_tiny_model(tokenizer), reward_funcs=trl_adapter.shop_reward,
                          args=_args(tmp_path, max_steps=1), train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=make())
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    advantages = batch["advantages"].tolist()
    assert advantages[2:] == [0.0, 0.0]  # TRL's own code: the dropped group moves nothing
    assert trainer._metrics["train"]["shop/dropped_groups_frac"][-1] == 0.5


def test_server_generate_caps_each_turn_at_the_context_budget(world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    log: list[dict] = []
    with serve(vllm_like_app(tokenizer, log=log)) as url:
        generate = server_generate(url + "/v1", "shop-model", max_tokens=4096, max_context=3000)
        asyncio.run(trl_adapter.run_episodes(["0"], tokenizer, generate, InProcessEnvironment(world),
                                             RolloutConfig(mode="append", max_steps=2, max_context_len=3000)))
    assert log and all(len(b["prompt"]) + b["max_tokens"] <= 3000 for b in log)


def test_concurrent_episodes_match_sequential_ones(world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    prompts = [str(t) for t in world.catalog.split("all")[:3] for _ in range(2)]
    config = RolloutConfig(mode="append", max_steps=8)
    results = {}
    for concurrency in (1, 4):
        generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world))
        results[concurrency] = asyncio.run(trl_adapter.run_episodes(
            prompts, tokenizer, generate, InProcessEnvironment(world), config, concurrency=concurrency))
    for a, b in zip(results[1], results[4], strict=True):
        assert a.status == b.status == COMPLETED and a.token_ids == b.token_ids and a.reward == b.reward


# --- a local OpenAI-compatible completions server that answers like vLLM (token ids + log-probs) -------------

def vllm_like_app(tokenizer: Any, *, log: list[dict]) -> FastAPI:
    """``POST /v1/completions`` with token-id prompts; the reply's text is a scripted action in the template's
    format, returned as vLLM does with ``return_tokens_as_token_ids`` (``"token_id:N"``) and ``token_logprobs``
    (plus ``token_ids`` when ``return_token_ids`` is asked)."""
    app = FastAPI()
    script = TemplatePolicyGenerate(tokenizer, None)

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict:
        body = await request.json()
        log.append(body)
        prompt = tokenizer.decode(body["prompt"], skip_special_tokens=False)
        page = prompt.rsplit("<tool_response>", 1)[-1]
        clicks = [line[2:] for line in page.split("可点击元素：", 1)[-1].splitlines() if line.startswith("- ")] \
            if "可点击元素：" in page else []
        clicks = [c for c in clicks if c != "back to search"]
        call = ({"name": "click", "arguments": {"value": clicks[0]}} if clicks
                else {"name": "search", "arguments": {"query": "小吃车"}})
        text = script.turn_text({"role": "assistant", "content": None,
                                 "tool_calls": [{"id": "c", "type": "function", "function": call}]})
        ids = tokenizer.encode(text, add_special_tokens=False)
        finish = "stop"
        if len(ids) > body["max_tokens"]:
            ids, finish = ids[: body["max_tokens"]], "length"
        logprobs = [-0.5 - (i % 5) / 10 for i in range(len(ids))]
        choice = {"index": 0, "text": tokenizer.decode(ids), "finish_reason": finish, "stop_reason": None,
                  "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": logprobs,
                               "top_logprobs": None, "text_offset": list(range(len(ids)))}}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        return {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": [choice],
                "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids)}}

    return app


def test_server_generate_plays_multi_turn_episodes_over_http(world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    log: list[dict] = []
    prompts = [str(t) for t in world.catalog.split("all")[:2] for _ in range(2)]
    with serve(vllm_like_app(tokenizer, log=log)) as url:
        generate = server_generate(url + "/v1", "shop-model", max_tokens=256)
        trajs = asyncio.run(trl_adapter.run_episodes(prompts, tokenizer, generate, InProcessEnvironment(world),
                                                     RolloutConfig(mode="append", max_steps=4), concurrency=4))
        cut = asyncio.run(trl_adapter.run_episodes(prompts[:1], tokenizer, server_generate(
            url + "/v1", "shop-model", max_tokens=5), InProcessEnvironment(world),
            RolloutConfig(mode="append", max_steps=4)))
    for t in trajs:
        assert t.status == COMPLETED and len(t.steps) >= 2 and t.error is None
        seg = t.segments[0]
        sampled = [lp for lp, m in zip(seg.log_probs, seg.loss_mask, strict=True) if m]
        assert sampled and all(-1.0 <= lp <= -0.5 for lp in sampled)  # the server's log-probs, kept in place
        assert Counter(t.trained_tokens) == Counter(t.generated_tokens)
    assert all(b["max_tokens"] == 256 and b["logprobs"] == 1 and isinstance(b["prompt"], list) for b in log[:-1])
    assert cut[0].status == TRUNCATED and cut[0].metadata["termination_reason"] == "generation_length"


def test_parse_completion_reads_both_server_shapes_and_rejects_text_tokens() -> None:
    vllm = {"choices": [{"finish_reason": "length", "logprobs": {"tokens": ["token_id:7", "token_id:9"],
                                                                  "token_logprobs": [-0.1, -0.2]}}]}
    gen = parse_completion(vllm)
    assert list(gen.token_ids) == [7, 9] and gen.finish_reason == "length"
    sglang = {"choices": [{"finish_reason": "stop", "meta_info": {"output_token_logprobs": [[-0.3, 4, "a"]]}}]}
    assert list(parse_completion(sglang).token_ids) == [4]
    with raises_kind(ModelCallError, "server_generate", match="not an id"):
        parse_completion({"choices": [{"logprobs": {"tokens": ["hello"], "token_logprobs": [-0.1]}}]})
    with raises_kind(ModelCallError, "server_generate", match="log-probs"):
        parse_completion({"choices": [{"text": "x"}]})


# --- environment_factory ------------------------------------------------------------------------------------

def test_tool_environment_plays_the_oracle_episode(world: ShopWorld) -> None:
    from shopsimrl.agent.play import play_episode

    task = world.catalog.split("all")[0]
    outcome = play_episode(world.new_env(shoppers=shopper_registry()), make_policy("oracle", world), task)
    env = ShopToolEnvironment(world)
    first = env.reset(**{k: v[0] for k, v in environment_rows([task]).items()})
    assert "购物任务" in first
    for action in outcome.actions:
        name, value = action[:-1].split("[", 1)
        getattr(env, name)(value)
    assert env.get_reward() == outcome.final["reward_detail"]["r_strict"] == 1.0
    assert env.search("x") == "本回合已结束，不能再调用工具。"
    env.reset(task_id=task)  # pooled instances are reset and reused
    assert env.get_reward() == 0.0  # unfinished: ended with action_limit


@pytest.mark.slow
def test_tool_environment_meets_trls_environment_factory_contract(world: ShopWorld, corpus: list[str],
                                                                   tmp_path: Path) -> None:
    import datasets
    from transformers.utils import get_json_schema
    from trl import GRPOTrainer

    tokenizer = build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=QWEN25)
    rows = environment_rows(world.catalog.split("all")[:2])
    dataset = datasets.Dataset.from_dict(rows)
    trainer = GRPOTrainer(model=_tiny_model(tokenizer), args=_args(tmp_path, max_steps=1, max_completion_length=8),
                          train_dataset=dataset, processing_class=tokenizer,
                          environment_factory=ShopToolEnvironment.factory(world, max_steps=4))
    names = sorted(t.__name__ for t in trainer._env_tools[None])
    assert names == ["click", "search"]
    schemas = {t.__name__: get_json_schema(t) for t in trainer._env_tools[None]}
    assert schemas["click"]["function"]["parameters"]["required"] == ["value"]
    assert "ShopToolEnvironment" in trainer.reward_func_names  # get_reward is the reward source
    trainer.train()  # TRL calls reset(**row), generates, calls get_reward
    assert any("rewards/ShopToolEnvironment/mean" in h for h in trainer.state.log_history)


@pytest.mark.slow
def test_the_trl_example_runs_its_cpu_check(prepared_dir: Path, tmp_path: Path) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "trl" / "train_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--cpu-check", "--data", str(prepared_dir), "--output-dir", str(tmp_path / "o")]) == 0
    args = module.parse_args(["--model", "m", "--vllm-server", "http://127.0.0.1:8000"])  # the GPU command parses
    assert args.num_generations == 8 and args.temperature == 0.6 and args.max_new_tokens == 4096


@pytest.mark.slow
def test_the_trl_example_runs_its_cpu_check_in_dialogue_mode(prepared_dir: Path, tmp_path: Path) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "trl" / "train_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_example_dialogue", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--cpu-check", "--shopper", "rule", "--data", str(prepared_dir),
                        "--output-dir", str(tmp_path / "o")]) == 0
    assert module.parse_args(["--model", "m"]).max_turns is None  # each episode's own limit (30; 40 in dialogue)
    with pytest.raises(SystemExit):
        module.parse_args(["--shopper", "oracle"])

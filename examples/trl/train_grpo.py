"""GRPO on ShopSimRL with TRL 1.16: multi-turn shop episodes through ``rollout_func``, sampled by a vLLM server.

On a GPU machine (no code edits), start TRL's vLLM server with the policy model (vLLM plus TRL's weight-sync
endpoints), then train:

    trl vllm-serve --model Qwen/Qwen3-4B-Instruct-2507 --port 8000 --max-model-len 24576 --enable-prefix-caching true
    python examples/trl/train_grpo.py --model Qwen/Qwen3-4B-Instruct-2507 --vllm-server http://127.0.0.1:8000 \
        --data data/default --output-dir out/trl-grpo

With ``--vllm-server`` the config sets TRL's ``use_vllm=True``, ``vllm_mode="server"`` and
``vllm_server_base_url``: TRL then pushes the trainer's weights to that server before every rollout step that
follows an optimizer step (``GRPOTrainer._generate`` → ``vllm_generation.sync_weights()``), and the episodes
sample from it through its OpenAI-compatible ``/v1/completions`` (``server_generate``), each turn capped so that
prompt + completion fit ``--max-context`` (the server's ``--max-model-len``). Without ``--vllm-server`` the
trainer's own ``model.generate`` samples (slow).

Run length and batch (the reference run of docs/training.md): 80 rollout steps of 16 tasks x 8 episodes. In TRL's
units: ``--generation-batch-size 128`` completions per generation, optimizer steps of 64 completions
(``--per-device-batch`` x processes x ``--grad-accum``: 8 x 1 x 8 here, 16 x 4 x 1 in ``launch_8gpu.sh``), so two
optimizer steps per rollout step and ``--max-steps 160`` = 80 rollout steps. A checkpoint every ``--save-steps``
(40 optimizer steps = 20 rollout steps) in ``--output-dir``; ``--resume`` continues from the last one there.
On 8 GPUs (vLLM on 4, training on 4): ``examples/trl/launch_8gpu.sh``.

``--cpu-check`` runs what a CPU can: the dataset builds, the config parses, and one GRPO step runs with a tiny
random Llama, a byte-level BPE trained on the catalog, TRL's bundled Qwen2.5 chat template and a scripted
generate (the heuristic and random policies' actions rendered by the template). It is what CI runs.
Settings follow the reference run (docs/training.md): 8 rollouts per task, temperature 0.6, lr 1e-6, ε 0.2/0.28,
no KL, 4096 tokens per turn, 24576 context.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, ClassVar

from shopsimrl.dialogue import SHOPPER_NAMES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="HF model id or path (required unless --cpu-check)")
    parser.add_argument("--data", default="data/default", help="a prepared data directory")
    parser.add_argument("--split", default="train")
    parser.add_argument("--vllm-server", help="base URL of `trl vllm-serve` (no /v1): weights sync to it each step")
    parser.add_argument("--served-model-name", help="model name on the server (default: --model)")
    parser.add_argument("--env-url", help="a `shopsimrl serve` URL instead of the in-process environment")
    parser.add_argument("--output-dir", default="out/trl-grpo")
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--per-device-batch", type=int, default=8)
    parser.add_argument("--grad-accum", type=int, default=8, help="gradient accumulation steps")
    parser.add_argument("--generation-batch-size", type=int, default=128,
                        help="completions per generation, all processes (16 tasks x 8)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="optimizer steps (default 160 = 80 rollout steps; 1 with --cpu-check)")
    parser.add_argument("--save-steps", type=int, default=40, help="checkpoint interval in optimizer steps")
    parser.add_argument("--save-total-limit", type=int, default=3, help="checkpoints kept in --output-dir")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output-dir")
    parser.add_argument("--concurrency", type=int, default=32, help="episodes in flight per rollout call")
    parser.add_argument("--max-new-tokens", type=int, default=4096)
    parser.add_argument("--max-context", type=int, default=24576,
                        help="context budget per episode (= the server's --max-model-len)")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--max-turns", type=int, default=None,
                        help="model turns per episode (action_limit; default 30, 40 with --shopper)")
    parser.add_argument("--shopper", choices=SHOPPER_NAMES, default=None,
                        help="dialogue mode: every task plays against this shopper (ask_user; instruction withheld)")
    parser.add_argument("--limit", type=int, help="use only the first N tasks of the split")
    parser.add_argument("--difficulty", help="only tasks of these tiers: first, heuristic, strong, none "
                                             "(comma-separated; `shopsimrl data tiers`): a curriculum stage")
    parser.add_argument("--cpu-check", action="store_true", help="one step with a tiny model and scripted generate")
    return parser.parse_args(argv)


def build(args: argparse.Namespace) -> Any:
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    from shopsimrl.agent import InProcessEnvironment, ServiceEnvironment
    from shopsimrl.catalog.tiers import read_tiers, split_task_ids
    from shopsimrl.env import ShopWorld
    from shopsimrl.train.trl import make_rollout_func, server_generate, shop_reward, task_prompts

    world = ShopWorld.from_data_dir(args.data)
    ids = split_task_ids(args.data, args.split, difficulty=args.difficulty, limit=args.limit)
    tiers = read_tiers(args.data) if args.difficulty else None
    dataset = datasets.Dataset.from_dict(task_prompts(ids, shopper=args.shopper, tiers=tiers))  # "17" or "17@rule"
    environment = ServiceEnvironment(args.env_url) if args.env_url else InProcessEnvironment(world)
    config = grpo_config(args)
    generate_factory = None
    if args.cpu_check:
        model, tokenizer, generate_factory = _cpu_parts(world, args)
        config.update(use_cpu=True, bf16=False, dataloader_num_workers=0)
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not args.model:
            raise SystemExit("--model is required (or --cpu-check)")
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype="bfloat16")
        config.update(bf16=True)
        if args.vllm_server:
            generate = server_generate(args.vllm_server.rstrip("/") + "/v1", args.served_model_name or args.model,
                                       max_tokens=args.max_new_tokens, temperature=args.temperature,
                                       max_context=args.max_context)
            generate_factory = lambda trainer: generate  # noqa: E731
    rollout_func = make_rollout_func(environment, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                     max_steps=args.max_turns, max_context=args.max_context,
                                     concurrency=args.concurrency, generate_factory=generate_factory)
    return GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, reward_funcs=shop_reward,
                       rollout_func=rollout_func, args=GRPOConfig(**config))


def grpo_config(args: argparse.Namespace) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments (TRL's own names; the reference-run settings of docs/training.md)."""
    config: dict[str, Any] = dict(
        output_dir=args.output_dir, num_generations=args.num_generations,
        per_device_train_batch_size=args.per_device_batch, max_steps=args.max_steps,
        gradient_accumulation_steps=args.grad_accum, generation_batch_size=args.generation_batch_size,
        learning_rate=args.learning_rate, beta=0.0, epsilon=0.2, epsilon_high=0.28,
        max_completion_length=args.max_context, temperature=args.temperature, top_p=1.0,
        adam_beta1=0.9, adam_beta2=0.98, weight_decay=0.1, lr_scheduler_type="constant",
        logging_steps=1, report_to=[], save_strategy="steps", save_steps=args.save_steps,
        save_total_limit=args.save_total_limit)
    if args.vllm_server and not args.cpu_check:  # TRL syncs weights to this server before each rollout step
        config.update(use_vllm=True, vllm_mode="server", vllm_server_base_url=args.vllm_server.rstrip("/"))
    return config


def _cpu_parts(world: Any, args: argparse.Namespace) -> tuple[Any, Any, Any]:
    import gzip
    import json

    import torch
    import trl
    from transformers import LlamaConfig, LlamaForCausalLM

    from shopsimrl.agent.policies import make_policy
    from shopsimrl.agent.prompt import SYSTEM_PROMPT
    from shopsimrl.testing.scripted import TemplatePolicyGenerate
    from shopsimrl.train.bpe_tokenizer import build_bpe_tokenizer
    from shopsimrl.train.chat_template import episode_tools
    from shopsimrl.train.rollout import TurnRequest

    products = json.loads(gzip.decompress((Path(args.data) / "products.json.gz").read_bytes()))[:2000]
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")
    tokenizer = build_bpe_tokenizer([SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)],
                                    vocab_size=2000, chat_template=template)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=65536,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None))
    policies = [make_policy("dialogue-heuristic" if args.shopper else "heuristic", world), make_policy("random", world)]

    class Scripted(TemplatePolicyGenerate):
        episodes: ClassVar[dict[int, int]] = {}

        def text_for(self, request: TurnRequest) -> str:
            index = self.episodes.setdefault(id(request.messages), len(self.episodes))  # one history per episode
            self.policy = policies[index % 2]
            return super().text_for(request)

    tools = episode_tools(dialogue=args.shopper is not None)
    return model, tokenizer, lambda trainer: Scripted(tokenizer, policies[0], tools=tools)


def run(args: argparse.Namespace) -> Any:
    """Build the trainer and train (from the last checkpoint with ``--resume``); returns the trainer."""
    if args.cpu_check:
        args.num_generations, args.per_device_batch = 2, 4
        args.grad_accum, args.generation_batch_size = 1, 4
        args.max_steps = args.max_steps or 1
        args.concurrency, args.max_new_tokens = 4, 256
        args.max_turns = args.max_turns or (12 if args.shopper else 4)
    args.max_steps = args.max_steps or 160
    trainer = build(args)
    trainer.train(resume_from_checkpoint=True if args.resume else None)
    return trainer


def main(argv: list[str] | None = None) -> int:
    trainer = run(parse_args(argv))
    print(f"done: {trainer.state.global_step} step(s); last log: {trainer.state.log_history[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Context choices of the CPU recipe (docs/training.md#train-a-small-policy-on-cpu) and their cost, measured.

Plays ``--tasks`` persona train tasks with the heuristic's actions rendered by the chat template (the token
sequences an SFT-trained policy produces), then times the recipe's model on them:

* per turn, re-encoding the whole episode (what ``model.generate`` does every turn) vs encoding only the new
  tokens with the key/value cache of the previous turn (``CachedGenerate``);
* one training forward+backward over the episode, at the turn limits 4, 6 and 8 (the sequence a GRPO step trains).

Usage: ``python benchmarks/bench_cpu_context.py data/default [--checkpoint runs/cpu-demo/model/init]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data")
    parser.add_argument("--checkpoint", help="a recipe checkpoint (default: a fresh cpu-preset model)")
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch
    from transformers import DynamicCache

    from shopsimrl.agent import InProcessEnvironment
    from shopsimrl.agent.policies import make_policy
    from shopsimrl.env import ShopWorld
    from shopsimrl.testing.scripted import TemplatePolicyGenerate
    from shopsimrl.train import trl as trl_adapter
    from shopsimrl.train.chat_template import episode_tools
    from shopsimrl.train.local_lm import PRESETS, build_model, build_tokenizer, corpus
    from shopsimrl.train.rollout import RolloutConfig

    torch.set_num_threads(args.threads)
    if args.checkpoint:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(args.checkpoint)
        tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    else:
        tokenizer = build_tokenizer(corpus(args.data), PRESETS["cpu"])
        model = build_model(tokenizer, PRESETS["cpu"], seed=0)
    world = ShopWorld.from_data_dir(args.data)
    tasks = [str(t) for t in world.catalog.split("train")[: args.tasks]]
    generate = TemplatePolicyGenerate(tokenizer, make_policy("heuristic", world), tools=episode_tools())
    episodes = asyncio.run(trl_adapter.run_episodes(tasks, tokenizer, generate, InProcessEnvironment(world),
                                                    RolloutConfig(mode="append", max_steps=8), concurrency=1))
    model.eval()
    full_s = cached_s = 0.0
    full_tokens = cached_tokens = 0
    for episode in episodes:
        ids = episode.token_ids
        mask = episode.loss_mask
        # turn starts: the first sampled token of each turn
        starts = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
        with torch.no_grad():
            for start in starts:
                t = time.perf_counter()
                model(torch.tensor([ids[:start]]))
                full_s += time.perf_counter() - t
                full_tokens += start
            past, done = DynamicCache(), 0
            for start in starts:
                t = time.perf_counter()
                out = model(torch.tensor([ids[done:start]]), past_key_values=past, use_cache=True)
                past, done = out.past_key_values, start
                cached_s += time.perf_counter() - t
            cached_tokens += starts[-1]
    print(f"{len(episodes)} episodes, {sum(len(e.token_ids) for e in episodes) / len(episodes):.0f} tokens each, "
          f"{sum(len(e.steps) for e in episodes) / len(episodes):.1f} turns")
    print(f"prompt encoding per episode: re-encode every turn {full_s / len(episodes):.2f} s "
          f"({full_tokens / len(episodes):.0f} tokens) vs KV-cache reuse {cached_s / len(episodes):.2f} s "
          f"({cached_tokens / len(episodes):.0f} tokens): {full_s / max(cached_s, 1e-9):.1f}x")
    model.train()
    for turns in (4, 6, 8):
        lengths = []
        seconds = 0.0
        for episode in episodes:
            ids, mask = episode.token_ids, episode.loss_mask
            starts = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
            cut = starts[turns] if len(starts) > turns else len(ids)
            x = torch.tensor([ids[:cut]])
            t = time.perf_counter()
            model(x, labels=x).loss.backward()
            seconds += time.perf_counter() - t
            lengths.append(cut)
        print(f"turn limit {turns}: {sum(lengths) / len(lengths):.0f} tokens per episode, forward+backward "
              f"{seconds / len(episodes):.2f} s per episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())

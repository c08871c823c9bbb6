"""Rollout-core overhead per turn (excluding generation and the environment) and one GRPO rollout step of
16 groups × 8 episodes with a scripted generate function (targets: ≤ 2 ms per turn, ≤ 10 s per step)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from shopsimrl.agent.policies import make_policy  # noqa: E402
from shopsimrl.agent.runtime import InProcessEnvironment  # noqa: E402
from shopsimrl.env.shop_env import ShopWorld  # noqa: E402
from shopsimrl.train.groups import rollout_step  # noqa: E402
from shopsimrl.train.rollout import RolloutConfig, RolloutContext, RolloutTimer  # noqa: E402
from shopsimrl.train.toy import PolicyGenerate, ToyChatTokenizer  # noqa: E402

TURN_TARGET_MS, STEP_TARGET_S = 2.0, 10.0


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    path = ROOT / "data" / "fixture"
    if not (path / "manifest.json").exists():
        from shopsimrl.catalog.prepare import prepare_dataset

        prepare_dataset(ROOT / "tests" / "data" / "fixture_catalog.json", path)
    return path


def step(world: ShopWorld, tokenizer, policy: str, groups: int, n: int, mode: str) -> tuple[float, RolloutTimer, int]:
    ids = world.catalog.split("all")
    contexts = [RolloutContext(ids[i % len(ids)]) for i in range(groups)]
    timer = RolloutTimer()
    generate = PolicyGenerate(tokenizer, make_policy(policy, world))
    t0 = time.perf_counter()
    out = asyncio.run(rollout_step(contexts, tokenizer, generate, InProcessEnvironment(world), target_groups=groups,
                                   n=n, timer=timer, config=RolloutConfig(mode=mode)))
    return time.perf_counter() - t0, timer, len(out.groups)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="a prepared data directory (default: the fixture catalog)")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    args, _ = parser.parse_known_args()
    world = ShopWorld.from_data_dir(data_dir(args.data))
    tokenizers = [("toy char tokenizer", ToyChatTokenizer())]
    try:
        from shopsimrl.agent.prompt import SYSTEM_PROMPT
        from shopsimrl.train.tiny_hf import build_tokenizer

        tokenizers.append(("HF fast tokenizer + Jinja template", build_tokenizer([SYSTEM_PROMPT])))
    except ImportError:
        print("(transformers not installed: HF tokenizer figures skipped)")
    step(world, tokenizers[0][1], "heuristic", 2, 2, "resegment")  # warm the search cache
    for name, tokenizer in tokenizers:
        if not hasattr(tokenizer, "conversation_for"):
            print(f"\n{name}: per-turn template render + encode only")
            t0, reps = time.perf_counter(), 50
            from shopsimrl.agent.prompt import first_user_message, system_message
            from shopsimrl.train.rollout import render_prompt

            env = world.new_env()
            reset = env.reset(world.catalog.split("all")[0])
            messages = [{"role": "system", "content": system_message(reset["user_persona"])},
                        {"role": "user", "content": first_user_message(reset["task_instruction"], reset["observation"])}]
            tools = env.tools()
            for _ in range(reps):
                render_prompt(tokenizer, messages, tools)
            print(f"  render_prompt: {(time.perf_counter() - t0) / reps * 1000:.2f} ms per turn (first turn prompt)")
            continue
        for mode in ("resegment", "append"):
            wall, timer, kept = step(world, tokenizer, "heuristic", args.groups, args.n, mode)
            per_turn = timer.core_s / max(timer.turns, 1) * 1000
            print(f"\n{name}, mode={mode}: {args.groups} groups × {args.n} = {timer.episodes} episodes, "
                  f"{timer.turns} turns, {kept} groups kept")
            print(f"  rollout step wall        {wall:.2f} s   (target ≤ {STEP_TARGET_S} s, ratio {wall / STEP_TARGET_S:.2f})")
            print(f"  core overhead per turn   {per_turn:.3f} ms (target ≤ {TURN_TARGET_MS} ms, "
                  f"ratio {per_turn / TURN_TARGET_MS:.2f}) — render, bookkeeping, parsing; excludes generate and env")
            print(f"  generate (scripted)      {timer.generate_s / max(timer.turns, 1) * 1000:.3f} ms per turn")
            print(f"  environment              {timer.env_s / max(timer.turns, 1) * 1000:.3f} ms per turn")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

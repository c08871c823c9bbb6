"""Rollout-core overhead per turn with a real Hugging Face chat template (Qwen2.5's, as bundled by TRL, on a
byte-level BPE trained here), one GRPO rollout step of 16 groups × 8 episodes with a scripted generate, and the
episodes/s of TRL's ``rollout_func`` with concurrency on against off (targets: ≤ 2 ms per turn, ≤ 10 s per step).

Printed figures, not a timed test. The per-turn overhead is everything the core does besides generating and
stepping the environment: template renders, tokenization, the turn-boundary computation, response parsing,
validation and bookkeeping.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from shopsimrl.agent import InProcessEnvironment  # noqa: E402
from shopsimrl.agent.episode import EpisodeStats  # noqa: E402
from shopsimrl.agent.policies import make_policy  # noqa: E402
from shopsimrl.env import ShopWorld  # noqa: E402
from shopsimrl.train.groups import rollout_step  # noqa: E402
from shopsimrl.train.rollout import RolloutConfig, RolloutContext  # noqa: E402

TURN_TARGET_MS, STEP_TARGET_S = 2.0, 10.0


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    path = ROOT / "data" / "fixture"
    if not (path / "manifest.json").exists():
        from shopsimrl.catalog import prepare_dataset

        prepare_dataset(ROOT / "tests" / "data" / "fixture_catalog.json", path)
    return path


def hf_tokenizer(data: Path, template: str):
    import trl

    from shopsimrl.agent.prompt import SYSTEM_PROMPT
    from shopsimrl.train.bpe_tokenizer import build_bpe_tokenizer

    products = json.loads(gzip.decompress((data / "products.json.gz").read_bytes()))[:2000]
    text = (Path(trl.__file__).parent / "chat_templates" / f"{template}.jinja").read_text(encoding="utf-8")
    return build_bpe_tokenizer([SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)],
                               vocab_size=4000, chat_template=text)


def grpo_step(world: ShopWorld, tokenizer, groups: int, n: int, mode: str) -> tuple[float, EpisodeStats, int]:
    from shopsimrl.testing.scripted import TemplatePolicyGenerate

    ids = world.catalog.split("all")
    contexts = [RolloutContext(ids[i % len(ids)]) for i in range(groups)]
    timer = EpisodeStats()
    generate = TemplatePolicyGenerate(tokenizer, make_policy("heuristic", world))
    t0 = time.perf_counter()
    out = asyncio.run(rollout_step(contexts, tokenizer, generate, InProcessEnvironment(world), target_groups=groups,
                                   n=n, timer=timer, config=RolloutConfig(mode=mode)))
    return time.perf_counter() - t0, timer, len(out.groups)


def trl_throughput(world: ShopWorld, tokenizer, episodes: int, latency_s: float) -> dict[int, float]:
    """Episodes/s of the TRL adapter's episode runner against a generate with server-like latency."""
    from shopsimrl.testing.scripted import TemplatePolicyGenerate
    from shopsimrl.train.trl import run_episodes

    prompts = [str(t) for t in world.catalog.split("all")][:episodes]
    prompts = (prompts * (episodes // max(1, len(prompts)) + 1))[:episodes]
    out = {}
    for concurrency in (1, 8):
        inner = TemplatePolicyGenerate(tokenizer, make_policy("heuristic", world))

        async def generate(ids: list[int], inner=inner):
            await asyncio.sleep(latency_s)  # an inference server's time to first token + decode
            return inner(ids)

        t0 = time.perf_counter()
        asyncio.run(run_episodes(prompts, tokenizer, generate, InProcessEnvironment(world),
                                 RolloutConfig(mode="append", max_steps=30), concurrency=concurrency))
        out[concurrency] = episodes / (time.perf_counter() - t0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", help="a prepared data directory (default: the fixture catalog)")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--template", default="qwen2_5", help="a template file name bundled by TRL")
    parser.add_argument("--trl-episodes", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args, _ = parser.parse_known_args()
    data = data_dir(args.data)
    world = ShopWorld.from_data_dir(data)
    try:
        tokenizer = hf_tokenizer(data, args.template)
    except ImportError:
        print("(the train extra is not installed: nothing to measure)")
        return 0
    grpo_step(world, tokenizer, 2, 2, "resegment")  # warm the search cache and the template
    for mode in ("resegment", "append"):
        wall, timer, kept = grpo_step(world, tokenizer, args.groups, args.n, mode)
        per_turn = timer.core_s / max(timer.turns, 1) * 1000
        print(f"\nHF template {args.template} (byte-level BPE), mode={mode}: {args.groups} groups × {args.n} = "
              f"{timer.episodes} episodes, {timer.turns} turns, {kept} groups kept")
        print(f"  rollout step wall        {wall:.2f} s   (target ≤ {STEP_TARGET_S} s, ratio {wall / STEP_TARGET_S:.2f})")
        print(f"  core overhead per turn   {per_turn:.3f} ms (target ≤ {TURN_TARGET_MS} ms, "
              f"ratio {per_turn / TURN_TARGET_MS:.2f}) — render, tokenize, boundary, parse; excludes generate, env")
        print(f"  generate (scripted)      {timer.model_s / max(timer.turns, 1) * 1000:.3f} ms per turn")
        print(f"  environment              {timer.env_s / max(timer.turns, 1) * 1000:.3f} ms per turn")
    rates = trl_throughput(world, tokenizer, args.trl_episodes, args.latency_ms / 1000)
    print(f"\nTRL rollout_func episode runner, {args.trl_episodes} episodes, generate latency {args.latency_ms:.0f} ms:")
    print(f"  concurrency 1: {rates[1]:.2f} episodes/s   concurrency 8: {rates[8]:.2f} episodes/s   "
          f"(×{rates[8] / rates[1]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

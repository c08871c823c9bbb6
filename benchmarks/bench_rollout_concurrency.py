"""Rollout-core concurrency (issue 25 item 7): rendering and tokenization off the event loop, incremental
re-segment mode. Printed figures and ratios, not a timed test.

1. Per-turn core time (render + tokenize one prompt) at 3k, 6k, 9k and 12k prompt tokens: re-segment full
   (the previous behaviour), re-segment incremental (now) and append (targets: incremental flat within 1.5x
   from 3k to 12k and at most 2x append's).
2. 64 concurrent episodes against a scripted server answering after 50 ms, with the core on the event loop
   (previous) and in the render pool (now): wall time against the larger of the server-bound ideal (the longest
   episode's turns x 50 ms) and the measured CPU work (process CPU time), the event loop's longest block
   and the longest step of a rollout coroutine on the loop (targets: ratio <= 1.3, longest block <= 20 ms);
   medians of --repeats runs after a warm-up run.

Qwen2.5's chat template as TRL bundles it, on a byte-level BPE trained on the catalog (4000 tokens).

    PYTHONPATH=src python benchmarks/bench_rollout_concurrency.py [--data DIR] [--episodes 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_rollout import data_dir, hf_tokenizer  # noqa: E402
from shopsimrl.agent import InProcessEnvironment  # noqa: E402
from shopsimrl.agent.policies import make_policy  # noqa: E402
from shopsimrl.env import ShopWorld  # noqa: E402
from shopsimrl.testing.scripted import TemplatePolicyGenerate  # noqa: E402
from shopsimrl.train import rollout as core  # noqa: E402
from shopsimrl.train.chat_template import encode, episode_tools  # noqa: E402
from shopsimrl.train.rollout import Generation, RolloutConfig, RolloutContext, TokenTurns, run_rollout  # noqa: E402

SIZES = (3000, 6000, 9000, 12000)
SERVER_S = 0.05


def per_turn_ms(world: ShopWorld, tokenizer: Any, mode: str, incremental: bool, size: int, repeats: int = 15
                ) -> float:
    """Fastest of ``repeats`` timings of one turn's prompt (render + tokenize) once the conversation holds
    ``size`` tokens (the minimum: the machine may be shared)."""
    env = world.new_env()
    reset = env.reset(0)
    observation = env.step("search[小吃车]")["observation"]
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": {"query": "小吃车"}}}
    turn = [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": observation}]
    hooks = TokenTurns(RolloutContext(0), tokenizer, lambda ids: Generation([1], [0.0]),
                       RolloutConfig(mode=mode, incremental=incremental))
    hooks.start(None, reset)  # type: ignore[arg-type]  # start reads only the reset
    tools = episode_tools()
    while True:
        ids = hooks._prompt(tools)
        if len(ids) >= size:
            break
        hooks.ledger.prompt(ids)
        sampled = encode(tokenizer, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"小吃车\"}}\n"
                                    "</tool_call><|im_end|>")
        hooks.ledger.sample(sampled, [0.0] * len(sampled))
        hooks.last_stop = "<|im_end|>"
        hooks.turn_start = len(hooks.messages)
        hooks.messages.extend(turn)
    times = []
    for _ in range(repeats):  # the same next turn, re-timed (the state is restored after each)
        saved = (list(hooks.messages), hooks.turn_start, hooks.canonical)
        hooks.ledger.prompt(ids)
        hooks.turn_start = len(hooks.messages)
        hooks.messages.extend(turn)
        t0 = time.perf_counter()
        hooks._prompt(tools)
        times.append(time.perf_counter() - t0)
        hooks.messages, hooks.turn_start, hooks.canonical = saved
    return min(times) * 1000


async def _inline(fn: Any, *args: Any) -> Any:
    return fn(*args)


def concurrent(world: ShopWorld, tokenizer: Any, episodes: int, mode: str, off_loop: bool) -> dict[str, float]:
    """One run of ``episodes`` concurrent episodes: wall, ideal, CPU, their ratio, the event loop's longest
    block (a 1 ms heartbeat's worst lateness) and the longest single step of a rollout coroutine on the loop
    (the core's own work there; the rest of a block is the loop waiting for the GIL after select/recv while
    worker threads run Python: environment steps, the scripted server's policy)."""
    ids = world.catalog.split("all")
    inner = TemplatePolicyGenerate(tokenizer, make_policy("heuristic", world))
    turns: dict[int, int] = {}
    core_worst = [0.0]
    handle_run = asyncio.events.Handle._run

    def timed_run(handle: Any) -> None:
        t = time.perf_counter()
        handle_run(handle)
        task = getattr(handle._callback, "__self__", None)
        if isinstance(task, asyncio.Task) and task.get_coro().__qualname__ == "run_rollout":
            core_worst[0] = max(core_worst[0], time.perf_counter() - t)

    async def generate(prompt_ids: list[int]) -> Generation:
        await asyncio.sleep(SERVER_S)  # the inference server's latency
        return await asyncio.to_thread(inner, prompt_ids)  # its (scripted) sampling is the server's CPU, not ours

    async def main() -> float:
        worst = 0.0
        stop = False

        async def monitor() -> None:
            nonlocal worst
            while not stop:
                t = time.perf_counter()
                await asyncio.sleep(0.001)
                worst = max(worst, time.perf_counter() - t - 0.001)

        watcher = asyncio.create_task(monitor())
        cfg = RolloutConfig(mode=mode, incremental=off_loop, max_steps=12)
        results = await asyncio.gather(*(run_rollout(RolloutContext(ids[i % len(ids)]), tokenizer, generate,
                                                     InProcessEnvironment(world, threaded=True), config=cfg)
                                         for i in range(episodes)))
        stop = True
        await watcher
        for i, t in enumerate(results):
            turns[i] = sum(1 for s in t.steps if "sampled_tokens" in s)
        return worst

    core.prepare_tokenizer(tokenizer)  # once per tokenizer (template checks), not per episode
    original = core.off_loop
    core.off_loop = original if off_loop else _inline  # type: ignore[assignment]
    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        worst = asyncio.run(main())
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        core.off_loop = original  # type: ignore[assignment]
        asyncio.events.Handle._run = handle_run  # type: ignore[method-assign]
    ideal = max(turns.values()) * SERVER_S
    return {"wall": wall, "ideal": ideal, "cpu": cpu, "ratio": wall / max(ideal, cpu), "block_ms": worst * 1000,
            "core_ms": core_worst[0] * 1000}


def repeated(world: ShopWorld, tokenizer: Any, episodes: int, mode: str, off_loop: bool, repeats: int
             ) -> dict[str, float]:
    """A warm-up run (first searches fill the engine's caches), then the median of ``repeats`` runs: a longest
    block is a maximum over ~0.7 s and varies run to run by +-5 ms on a quiet 2-core machine."""
    concurrent(world, tokenizer, episodes, mode, off_loop)
    runs = [concurrent(world, tokenizer, episodes, mode, off_loop) for _ in range(repeats)]
    out = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    out["block_max_ms"] = max(r["block_ms"] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per row after one warm-up run")
    args = parser.parse_args(argv)
    data = data_dir(args.data)
    world = ShopWorld.from_data_dir(data)
    tokenizer = hf_tokenizer(data, "qwen2_5")
    print("1. per-turn core time (ms) by prompt length (tokens)")
    print(f"{'prompt':>8s} {'reseg full':>11s} {'reseg incr':>11s} {'append':>8s}")
    rows = {}
    for size in SIZES:
        rows[size] = (per_turn_ms(world, tokenizer, "resegment", False, size),
                      per_turn_ms(world, tokenizer, "resegment", True, size),
                      per_turn_ms(world, tokenizer, "append", True, size))
        print(f"{size:8d} {rows[size][0]:11.2f} {rows[size][1]:11.2f} {rows[size][2]:8.2f}", flush=True)
    inc = [rows[s][1] for s in SIZES]
    print(f"   incremental 12k/3k: {inc[-1] / inc[0]:.2f}x (target <= 1.5x); incremental/append at 12k: "
          f"{rows[12000][1] / rows[12000][2]:.2f}x (target <= 2x); full 12k/3k: "
          f"{rows[12000][0] / rows[3000][0]:.2f}x")
    print(f"2. {args.episodes} concurrent episodes, scripted server {SERVER_S * 1000:.0f} ms per turn")
    print(f"   medians of {args.repeats} runs after a warm-up; block: the loop's longest block (max over the runs "
          "in brackets); core: the longest step of one rollout coroutine on the loop")
    print(f"{'mode':10s} {'core':9s} {'wall s':>7s} {'ideal s':>8s} {'cpu s':>6s} {'ratio':>6s} {'block ms':>14s} "
          f"{'core ms':>8s}")
    for mode in ("append", "resegment"):
        for off in (False, True):
            r = repeated(world, tokenizer, args.episodes, mode, off, args.repeats)
            label = "pool+incr" if off else "on loop"
            block = f"{r['block_ms']:.1f} [{r['block_max_ms']:.1f}]"
            print(f"{mode:10s} {label:9s} {r['wall']:7.2f} {r['ideal']:8.2f} {r['cpu']:6.2f} {r['ratio']:6.2f} "
                  f"{block:>14s} {r['core_ms']:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Evaluation pipeline benchmark: the heuristic policy in-process over the default catalog's test split.

Runs the full ``shopsimrl eval`` path (plan, manifest, runtime turn loop with validation, trace records written
and flushed, summary) twice into fresh run directories: a cold pass (empty search cache: every first query goes to
SQLite FTS5) and a warm pass (the same queries, now answered from the exact search cache). Figures: episodes/s
(target ≥ 200) and the runtime overhead per turn excluding the model call (target ≤ 1 ms), split into the
environment's share and what the runtime and pipeline add on top.

Usage: python benchmarks/bench_eval.py [--data data/default] [--split test] [--concurrency 32]
Without the data directory the default catalog is built first (about half a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from shopsimrl.env import ShopWorld
from shopsimrl.eval import EvalSettings, evaluate_async


def ensure_default(path: Path) -> None:
    if not (path / "manifest.json").is_file():
        from shopsimrl.generate.default import build_default_catalog

        print(f"building the default catalog into {path} …", flush=True)
        build_default_catalog(path)


def one_pass(world: ShopWorld, data: Path, split: str, concurrency: int, out: Path, label: str) -> dict:
    settings = EvalSettings(data=str(data), out=str(out), split=split, policy="heuristic", concurrency=concurrency)
    started = time.perf_counter()
    result = asyncio.run(evaluate_async(settings, world=world))
    wall = time.perf_counter() - started
    stats = result.stats
    episodes, turns = stats.episodes, stats.turns
    other = wall - stats.model_s - stats.env_s
    row = {
        "label": label, "episodes": episodes, "turns": turns, "wall_s": wall, "eps": episodes / wall,
        "turn_ms": 1000 * wall / turns, "model_ms": 1000 * stats.model_s / turns, "env_ms": 1000 * stats.env_s / turns,
        "runtime_ms": 1000 * other / turns, "no_model_ms": 1000 * (wall - stats.model_s) / turns,
        "success": result.summary["primary"]["success_rate"], "reward": result.summary["primary"]["reward_mean"],
    }
    print(
        f"{label:<5} {episodes} episodes / {turns} turns in {wall:.2f} s → {row['eps']:.0f} episodes/s | per turn: "
        f"total {row['turn_ms']:.3f} ms = policy (model call) {row['model_ms']:.3f} + env {row['env_ms']:.3f} "
        f"+ runtime/pipeline {row['runtime_ms']:.3f} ms | success {100 * row['success']:.2f}%, "
        f"r_strict {row['reward']:.4f}",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data/default")
    parser.add_argument("--split", default="test")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    data = Path(args.data)
    ensure_default(data)
    t = time.perf_counter()
    world = ShopWorld.from_data_dir(data)
    print(f"catalog {data}: {len(world.catalog.goals)} tasks, opened in {time.perf_counter() - t:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cold = one_pass(world, data, args.split, args.concurrency, Path(tmp) / "cold", "cold")
        warm = one_pass(world, data, args.split, args.concurrency, Path(tmp) / "warm", "warm")
    print()
    print(f"episodes/s (target ≥ 200): cold {cold['eps']:.0f} ({cold['eps'] / 200:.2f}× target), "
          f"warm {warm['eps']:.0f} ({warm['eps'] / 200:.2f}× target)")
    print(f"overhead per turn excluding the model call (target ≤ 1 ms): cold {cold['no_model_ms']:.3f} ms, "
          f"warm {warm['no_model_ms']:.3f} ms; of which runtime + traces (no env): cold {cold['runtime_ms']:.3f} ms, "
          f"warm {warm['runtime_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

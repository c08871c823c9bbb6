"""Dialogue mode figures (issue 16): single-turn vs dialogue success of the heuristic, the dialogue oracle.

On the persona test split of a data directory (default ``data/default``), prints for each setting the
success rate (r_success = 1), mean r_strict, questions per episode and slot recall (revealed / total):
the single-turn heuristic (visible ``instruction_simple`` + persona; and on the full instruction in standard
mode, which states every requirement), the dialogue heuristic (the shopper's
opening, a fixed question script), the dialogue oracle (asks every slot, then buys) and the dialogue
heuristic with noise (omit 0.2, approximate budget 0.3, paraphrase 0.5).

Usage: ``python benchmarks/bench_dialogue.py [DATA_DIR] [--limit N]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from shopsimrl.agent.play import play_dialogue, play_episode
from shopsimrl.agent.policies.dialogue import DialogueHeuristicPolicy, DialogueOraclePolicy
from shopsimrl.agent.policies.heuristic import HeuristicPolicy
from shopsimrl.dialogue import NoiseConfig, ShopperConfig
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopEnv

REPO = Path(__file__).resolve().parents[1]


def single_turn(env: ShopEnv, task_id: int, persona: bool | None = None) -> tuple[bool, float, int]:
    """The heuristic on the ordinary (non-dialogue) episode: success, reward, steps."""
    outcome = play_episode(env, HeuristicPolicy(), task_id, persona=persona)
    return outcome.success, outcome.reward, len(outcome.actions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=REPO / "data" / "default")
    parser.add_argument("--limit", type=int, default=0, help="first N test tasks (0 = all)")
    args, _ = parser.parse_known_args(argv)
    if not (args.data / "manifest.json").exists():
        print(f"no prepared catalog at {args.data}: run `shopsimrl data build-default` first")
        return 0
    env = ShopEnv.from_data_dir(args.data, shoppers=shopper_registry())
    tasks = env.world.catalog.split("test")
    tasks = tasks[: args.limit] if args.limit else tasks
    print(f"{len(tasks)} persona test tasks of {args.data}")
    print(f"{'setting':<34} {'success':>8} {'r_strict':>9} {'questions':>10} {'slot recall':>12} {'seconds':>8}")
    for label, persona in (("single-turn heuristic", None), ("single-turn, full instruction", False)):
        start = time.perf_counter()
        runs = [single_turn(env, task, persona) for task in tasks]
        print(
            f"{label:<34} {sum(r[0] for r in runs) / len(runs):>8.2%} "
            f"{sum(r[1] for r in runs) / len(runs):>9.4f} {0:>10.2f} {'-':>12} {time.perf_counter() - start:>8.1f}"
        )
    noisy = ShopperConfig(noise=NoiseConfig(omit=0.2, approximate_budget=0.3, paraphrase=0.5))
    settings = (
        ("dialogue heuristic", DialogueHeuristicPolicy(), None),
        ("dialogue oracle (asks every slot)", DialogueOraclePolicy(env.world), None),
        ("dialogue heuristic, noisy shopper", DialogueHeuristicPolicy(), noisy),
    )
    for label, policy, config in settings:
        start = time.perf_counter()
        episodes = [play_dialogue(env, task, policy, shopper_config=config) for task in tasks]
        n = len(episodes)
        recall = sum(e.slots_revealed for e in episodes) / max(1, sum(e.slots_total for e in episodes))
        print(
            f"{label:<34} {sum(e.success for e in episodes) / n:>8.2%} {sum(e.reward for e in episodes) / n:>9.4f} "
            f"{sum(e.questions for e in episodes) / n:>10.2f} {recall:>12.2%} {time.perf_counter() - start:>8.1f}"
        )
    shopper_speed(env, tasks[0])
    return 0


def shopper_speed(env: ShopEnv, task_id: int) -> None:
    """Replies per second on questions of the maximum length (adversarial: every lexicon word class, brackets)."""
    from shopsimrl.dialogue import RuleShopper
    from shopsimrl.versions import MAX_QUESTION_CHARS

    goal = env.world.catalog.goal(task_id)
    product = env.world.catalog.products_by_asin[goal["asin"]].raw
    questions = [("预算规格还有" * 40)[:MAX_QUESTION_CHARS], ("]" * MAX_QUESTION_CHARS), ("颜" * MAX_QUESTION_CHARS)]
    for question in questions:
        shopper = RuleShopper(goal, product)
        start = time.perf_counter()
        for _ in range(2000):
            shopper.reply(question)
        per_second = 2000 / (time.perf_counter() - start)
        print(f"rule shopper, {len(question)}-char question {question[:6]!r}…: {per_second:,.0f} replies/s")


if __name__ == "__main__":
    raise SystemExit(main())

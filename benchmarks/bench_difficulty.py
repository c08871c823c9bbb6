"""Difficulty benchmark: success of the oracle, the project heuristic, the strong rule policy and the trivial
policy on a split of a prepared catalog (issue 15 targets: oracle 100%, heuristic and strong ≤ 55%, trivial < 15%).

Usage: python benchmarks/bench_difficulty.py DATA_DIR [--split test] [--policies oracle,heuristic,first]
       [--limit N] [--workers N]

Prints one line per policy: successes / tasks, success rate, mean steps, share of tasks bought with the wrong
type (r_type < 1, e.g. a cross-leaf confuser), seconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from shopsimrl.agent.difficulty import measure_policy
from shopsimrl.catalog import Catalog


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--policies", default="oracle,heuristic,strong,first")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    catalog = Catalog.from_data_dir(args.data)
    ids = list(catalog.split(args.split))[: args.limit]
    print(f"{args.data}: split {args.split}, {len(ids)} tasks")
    for name in args.policies.split(","):
        started = time.perf_counter()
        measure = measure_policy(args.data, name.strip(), ids, workers=args.workers)
        print(
            f"{name:>9}: {measure.successes}/{measure.tasks} = {100 * measure.success_rate:.2f}% success, "
            f"{measure.steps_mean:.2f} steps, wrong type (r_type < 1) {100 * measure.wrong_type / max(1, measure.tasks):.2f}%, "
            f"{time.perf_counter() - started:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

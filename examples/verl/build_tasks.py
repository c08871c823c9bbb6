"""Write verl's train/val parquet files for the shop: one row per task, ``agent_name: shopsim``.

    python examples/verl/build_tasks.py --data data/default --out shop_tasks

writes ``shop_tasks/train.parquet`` (the train split) and ``shop_tasks/val.parquet`` (the val split).
``--shopper rule`` writes dialogue rows (``extra_info.shopper``; the agent asks the shopper, issue 16).
``--difficulty first,heuristic`` keeps the tasks of those tiers (``shopsimrl data tiers``): a curriculum stage.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from shopsimrl.dialogue import SHOPPER_NAMES
from shopsimrl.train.verl import task_rows, write_parquet


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a prepared catalog directory (shopsimrl data build-default)")
    parser.add_argument("--out", default="shop_tasks", help="output directory")
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks per split")
    parser.add_argument("--shopper", choices=SHOPPER_NAMES, default=None,
                        help="dialogue mode: every row plays against this shopper (ask_user; instruction withheld)")
    parser.add_argument("--difficulty", help="only tasks of these tiers: first, heuristic, strong, none (comma-separated)")
    args = parser.parse_args(argv)
    for split in ("train", "val"):
        rows = task_rows(args.data, split, args.limit, shopper=args.shopper, difficulty=args.difficulty)
        write_parquet(rows, Path(args.out) / f"{split}.parquet")
        print(f"{split}: {len(rows)} tasks -> {Path(args.out) / f'{split}.parquet'}")


if __name__ == "__main__":
    main()

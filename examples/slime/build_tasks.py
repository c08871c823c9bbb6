"""Write slime's task data for the shop (JSONL, one line per task; the prompt is the task id).

    python examples/slime/build_tasks.py --data data/default --out shop_tasks

writes ``shop_tasks/train.jsonl`` (``--prompt-data``) and ``shop_tasks/val.jsonl`` (``--eval-prompt-data``).
``--shopper rule`` adds ``metadata.shopper``: dialogue episodes (the agent asks the shopper, issue 16).
``--difficulty first,heuristic`` keeps the tasks of those tiers (``shopsimrl data tiers``); when the catalog
has tiers, every line carries ``metadata.difficulty``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shopsimrl.catalog.tiers import split_task_ids, stored_tiers
from shopsimrl.dialogue import SHOPPER_NAMES
from shopsimrl.train.slime import task_lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a prepared catalog directory (shopsimrl data build-default)")
    parser.add_argument("--out", default="shop_tasks", help="output directory")
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks per split")
    parser.add_argument("--shopper", choices=SHOPPER_NAMES, default=None,
                        help="dialogue mode: every task plays against this shopper (ask_user; instruction withheld)")
    parser.add_argument("--difficulty", help="only tasks of these tiers: first, heuristic, strong, none (comma-separated)")
    args = parser.parse_args(argv)
    document = stored_tiers(args.data)
    tiers = {int(t): tier for tier, ids in document["tiers"].items() for t in ids} if document else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        ids = split_task_ids(args.data, split, difficulty=args.difficulty, limit=args.limit)
        lines = task_lines(ids, split, shopper=args.shopper, tiers=tiers)
        path = out / f"{split}.jsonl"
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), "utf-8")
        print(f"{split}: {len(lines)} tasks -> {path}")


if __name__ == "__main__":
    main()

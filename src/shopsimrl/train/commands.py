"""The ``export-sft`` command (registered by ``shopsimrl.cli``)."""

from __future__ import annotations

import argparse


def cmd_export_sft(args: argparse.Namespace) -> int:
    import sys

    from .sft import check_min_reward, check_output_path, collect, write_records

    check_output_path(args.out)  # flag mistakes before reading the run
    check_min_reward(args.min_reward)
    records = collect(args.run, min_reward=args.min_reward, granularity=args.granularity)
    path = write_records(records, args.out)
    print(f"wrote {len(records)} {args.granularity} records to {path}")
    if not records:
        print(f"shopsimrl: warning: no completed episode of {args.run} has r_strict >= {args.min_reward:g}; "
              f"{path} is empty", file=sys.stderr)
    return 0


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export-sft", help="successful trajectories of a run → chat SFT records with tools")
    export.add_argument("run", help="a run directory written by `shopsimrl eval` (traces.jsonl)")
    export.add_argument("--min-reward", type=float, default=1.0, help="keep episodes with r_strict >= this (0 to 1)")
    export.add_argument("--out", required=True, help="FILE.jsonl, or FILE.parquet (needs the train extra); other extensions are refused")
    export.add_argument("--granularity", choices=["episode", "turn"], default="episode",
                        help="one record per episode (default) or per accepted model turn")
    export.set_defaults(func=cmd_export_sft)

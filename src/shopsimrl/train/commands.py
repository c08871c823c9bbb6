"""The ``export-sft`` command (registered by ``shopsimrl.cli``)."""

from __future__ import annotations

import argparse


def cmd_export_sft(args: argparse.Namespace) -> int:
    from .sft import collect, write_records

    records = collect(args.run, min_reward=args.min_reward, granularity=args.granularity)
    path = write_records(records, args.out)
    print(f"wrote {len(records)} {args.granularity} records to {path}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser("export-sft", help="successful trajectories of a run → chat SFT records with tools")
    export.add_argument("run", help="a run directory written by `shopsimrl eval` (traces.jsonl)")
    export.add_argument("--min-reward", type=float, default=1.0, help="keep episodes with r_strict >= this")
    export.add_argument("--out", required=True, help="FILE.jsonl, or FILE.parquet (needs the train extra)")
    export.add_argument("--granularity", choices=["episode", "turn"], default="episode",
                        help="one record per episode (default) or per accepted model turn")
    export.set_defaults(func=cmd_export_sft)

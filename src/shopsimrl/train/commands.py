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
    add_train_commands(commands)


def cmd_cpu_demo(args: argparse.Namespace) -> int:
    from .cpu_demo import config_from_args, run_recipe

    results = run_recipe(config_from_args(args))
    table = (results.get("eval") or {}).get("checkpoints")
    if table:
        for name, row in table.items():
            print(f"{name:5s} success {row['success']:.4f}  r_strict {row['r_strict']:.4f}  "
                  f"protocol errors {row['protocol_error_rate']:.4f}  steps {row['steps']:.2f}")
    print(f"[cpu-demo] results: {args.out}/results.json, report: {args.out}/report.md")
    return 0


def add_train_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = commands.add_parser("train", help="training recipes").add_subparsers(dest="train_command", required=True)
    demo = train.add_parser("cpu-demo", help="train a small policy from scratch: tokenizer, SFT, GRPO, val eval, report")
    demo.add_argument("--data", default="data/default", help="a prepared data directory")
    demo.add_argument("--out", default="runs/cpu-demo", help="output directory (checkpoints, runs, report)")
    demo.add_argument("--preset", choices=["cpu", "smoke", "gpu"], default="cpu",
                      help="cpu: the 2-core recipe (about 1 h); smoke: a minute-long check; gpu: larger model and batch")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--stages", help="comma-separated subset of init,demos,sft,grpo,eval,report (default: all)")
    for name, kind in (("threads", int), ("sft_steps", int), ("grpo_steps", int), ("group_size", int),
                       ("groups_per_step", int), ("sft_lr", float), ("grpo_lr", float), ("eval_tasks", int),
                       ("max_turns", int), ("max_context", int), ("max_new_tokens", int),
                       ("demo_train_tasks", int), ("demo_standard_tasks", int), ("temperature", float),
                       ("eval_temperature", float), ("sft_minutes", float), ("grpo_minutes", float),
                       ("sft_batch", int)):
        demo.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None)
    demo.set_defaults(func=cmd_cpu_demo)

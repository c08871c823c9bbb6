"""The ``export-sft`` command (registered by ``shopsimrl.cli``)."""

from __future__ import annotations

import argparse

from ..cli_data import add_data_argument


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
    from ..cli_data import resolve_data
    from .cpu_demo_run import config_from_args, given_arguments, run_recipe

    args.data = resolve_data(args.data)
    results = run_recipe(config_from_args(args), given_arguments(args))
    table = (results.get("eval") or {}).get("checkpoints")
    if table:
        for name, row in table.items():
            print(f"{name:5s} success {row['success']:.4f}  r_strict {row['r_strict']:.4f}  "
                  f"protocol errors {row['protocol_error_rate']:.4f}  steps {row['steps']:.2f}")
    print(f"[cpu-demo] results: {args.out}/results.json, report: {args.out}/report.md")
    return 0


PRESET_NAMES = ("cpu", "smoke", "gpu")
# what a None knob means, in a --help default (RecipeConfig's comments)
NONE_MEANS = {"demo_train_tasks": "all", "eval_tasks": "all", "sft_minutes": "no cap", "grpo_minutes": "no cap",
              "grpo_max_groups": "4x-groups-per-step", "grpo_difficulty": "all"}


def preset_defaults(name: str) -> str:
    """The value of knob ``name`` under each preset, as ``--help`` states it: ``cpu 600, smoke 4, gpu 300``
    (or ``2 on every preset``), read from the presets themselves so the help cannot drift from them."""
    from .cpu_demo_run import config_from_args

    values = []
    for preset in PRESET_NAMES:
        value = getattr(config_from_args(argparse.Namespace(preset=preset, data="", out="", seed=0, stages=None)),
                        name)
        values.append(NONE_MEANS.get(name, "none") if value is None else ("on" if value else "off")
                      if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value))
    if len(set(values)) == 1:
        return f"{values[0]} on every preset"
    return ", ".join(f"{preset} {value}" for preset, value in zip(PRESET_NAMES, values, strict=True))


def add_train_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..agent.model_client import TOOL_CHOICES

    train = commands.add_parser("train", help="training recipes").add_subparsers(dest="train_command", required=True)
    demo = train.add_parser("cpu-demo", help="train a small policy from scratch: tokenizer, SFT, GRPO, val eval, report")
    add_data_argument(demo)
    demo.add_argument("--out", default="runs/cpu-demo", help="output directory (checkpoints, runs, report)")
    demo.add_argument("--preset", choices=PRESET_NAMES, default="cpu",
                      help="cpu: the 2-core recipe (about 2 h); smoke: every stage, small (about 2 min); gpu: larger model, bf16 and batched decoding on CUDA (unmeasured)")
    demo.add_argument("--seed", type=int, default=0, help="seed of every random choice (tokenizer, init, sampling)")
    demo.add_argument("--stages", help="comma-separated subset of init,demos,sft,grpo,eval,report (default: all)")
    overrides = {  # each overrides the preset's value (its help names every preset's)
        "threads": (int, "torch CPU threads"), "sft_steps": (int, "SFT optimizer steps with the loss on the assistant tokens"),
        "sft_lm_steps": (int, "SFT optimizer steps with the loss on every token, first"),
        "sft_short_steps": (int, "copy-curriculum SFT steps on the request and first call alone, before all others"),
        "sft_first_steps": (int, "copy-curriculum SFT steps on the full first-turn prompt and first call, next"),
        "sft_first_turn_share": (float, "share of the assistant-only SFT rows that are first-turn prefixes (request → search)"),
        "grpo_steps": (int, "GRPO optimizer steps"), "group_size": (int, "GRPO episodes per task (>= 4)"),
        "groups_per_step": (int, "GRPO groups per optimizer step"), "sft_lr": (float, "SFT learning rate"),
        "grpo_lr": (float, "GRPO learning rate"), "eval_tasks": (int, "persona val tasks evaluated per checkpoint"),
        "max_turns": (int, "turn limit of training episodes"), "max_context": (int, "prompt cap in tokens"),
        "max_new_tokens": (int, "tokens sampled per turn"),
        "demo_train_tasks": (int, "persona train tasks played by the demonstration policies"),
        "demo_standard_tasks": (int, "standard tasks played by the demonstration policies"),
        "temperature": (float, "GRPO sampling temperature"), "eval_temperature": (float, "eval sampling temperature"),
        "sft_minutes": (float, "wall-clock cap of each SFT phase"), "grpo_minutes": (float, "wall-clock cap of GRPO"),
        "sft_batch": (int, "SFT episodes per optimizer step"),
        "grpo_concurrency": (int, "GRPO episodes rolled out at once (with --batched-decoding, decoded as one batch)"),
        "eval_concurrency": (int, "evaluation requests in flight at once"),
    }
    for name, (kind, what) in overrides.items():
        demo.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None,
                          help=f"{what} (default: {preset_defaults(name)})")
    demo.add_argument("--tool-choice", dest="tool_choice", choices=TOOL_CHOICES, default=None,
                      help="required: each turn is one call of the page's tools, decoded under their schemas "
                           "(a click is one of the page's values), in GRPO and eval; auto: free sampling "
                           f"(default: {preset_defaults('tool_choice')})")
    demo.add_argument("--grpo-max-groups", dest="grpo_max_groups", type=int, default=None,
                      help="dynamic sampling: groups rolled out per GRPO step at most while looking for "
                           f"groups-per-step groups with reward spread (default: {preset_defaults('grpo_max_groups')})")
    demo.add_argument("--grpo-dynamic", dest="grpo_dynamic", action=argparse.BooleanOptionalAction, default=None,
                      help="dynamic sampling (DAPO): update on groups with reward spread only; --no-grpo-dynamic: "
                           f"on the first groups drawn, zero-spread ones included (default: {preset_defaults('grpo_dynamic')})")
    demo.add_argument("--difficulty", dest="grpo_difficulty", default=None,
                      help="GRPO task stream: train tasks of these difficulty tiers only, e.g. first,heuristic, or all "
                           f"(computed once if the catalog has none: `shopsimrl data tiers`) (default: {preset_defaults('grpo_difficulty')})")
    demo.add_argument("--batched-decoding", dest="batched_decoding", action=argparse.BooleanOptionalAction,
                      default=None, help="decode concurrent turns as one batch (GRPO rollouts, evaluation server): "
                                         f"the gpu preset's sampler (default: {preset_defaults('batched_decoding')})")
    demo.add_argument("--eval-unconstrained", dest="eval_unconstrained", action=argparse.BooleanOptionalAction,
                      default=None, help="also evaluate the SFT checkpoint with tool_choice auto (row sft-auto), "
                                         f"where protocol errors are possible (default: {preset_defaults('eval_unconstrained')})")
    demo.add_argument("--eval-init", dest="eval_init", action=argparse.BooleanOptionalAction, default=None,
                      help="also evaluate the random-init model (row init, about 17 min on 2 cores) beside the "
                           f"`random` policy row (default: {preset_defaults('eval_init')})")
    demo.set_defaults(func=cmd_cpu_demo)
    from .policy_command import add_policy_command

    add_policy_command(train)

"""``shopsimrl train policy``: train the linear ``learned`` policy by policy gradient (registered by
``train.commands``); writes the weights and the learning curve, and says how to evaluate them."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields, replace
from pathlib import Path

from ..cli_data import DATA_HELP, resolve_data
from ..errors import ConfigError
from .policy_gradient import FEATURE_GROUPS, PolicyTrainConfig

# smoke: a seconds-long check that the loop runs and learns (CI); default: the shipped weights' recipe.
PRESETS = {"default": PolicyTrainConfig(),
           "smoke": PolicyTrainConfig(episodes=800, eval_every=400, eval_tasks=40)}
WEIGHTS_FILE, CURVE_FILE = "weights.json", "curve.json"


def config_from_args(args: argparse.Namespace) -> PolicyTrainConfig:
    config = PRESETS[args.preset]
    overrides = {f.name: getattr(args, f.name) for f in fields(PolicyTrainConfig)
                 if getattr(args, f.name, None) is not None}
    if "ablate" in overrides:
        overrides["ablate"] = tuple(part for part in str(overrides["ablate"]).split(",") if part)
    config = replace(config, **overrides)
    config.check()
    return config


def cmd_train_policy(args: argparse.Namespace) -> int:
    from ..env.shop_env import ShopWorld
    from .policy_gradient import progress, train

    config = config_from_args(args)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / WEIGHTS_FILE).exists():
        raise ConfigError(f"{out} holds something other than a `train policy` run; choose another --out", code="recipe")
    world = ShopWorld.shared(resolve_data(args.data))
    progress(f"[train policy] {config.episodes} episodes in groups of {config.group_size} on the "
             f"{len(world.catalog.split('train'))} persona train tasks (seed {config.seed})")
    result = train(world, config, say=progress)
    out.mkdir(parents=True, exist_ok=True)
    result.model.save(out / WEIGHTS_FILE)
    episodes_per_s = config.episodes / result.wall_s if result.wall_s else 0.0
    summary = {"config": asdict(config), **result.summary(), "episodes_per_s": round(episodes_per_s, 1)}
    (out / CURVE_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"[train policy] {result.groups_skipped} of {result.groups_sampled} groups had no reward spread "
          f"(skipped); {result.wall_s:.0f} s, {episodes_per_s:.0f} episodes/s")
    print(f"[train policy] weights: {out / WEIGHTS_FILE}; learning curve: {out / CURVE_FILE}")
    print(f"evaluate them: SHOPSIMRL_LEARNED_WEIGHTS={out / WEIGHTS_FILE} shopsimrl eval --policy learned "
          "--split test" + (f" --data {args.data}" if args.data else ""))
    return 0


def add_policy_command(train: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    base = PolicyTrainConfig()
    command = train.add_parser(
        "policy", help="train the linear `learned` policy from scratch by policy gradient (RL only, train tasks)")
    command.add_argument("--data", default=None, help=DATA_HELP)
    command.add_argument("--out", default="runs/train-policy",
                         help=f"output directory: {WEIGHTS_FILE} and {CURVE_FILE} (default: runs/train-policy)")
    command.add_argument("--preset", choices=sorted(PRESETS), default="default",
                         help="default: the shipped weights' recipe; smoke: 800 episodes, seconds (default: default)")
    numbers = {
        "episodes": (int, "training episodes in all"), "group_size": (int, "episodes per task per group"),
        "groups_per_update": (int, "groups per Adam step"), "lr": (float, "Adam learning rate at the start"),
        "lr_final": (float, "the learning rate at the end, as a share of --lr (linear decay)"),
        "init_scale": (float, "standard deviation of the random initial weights"),
        "seed": (int, "seed of the initial weights, the task draws and the sampling"),
        "eval_every": (int, "training episodes between greedy evaluations (0: none)"),
        "eval_tasks": (int, "eval-split tasks per evaluation (default: all)"),
    }
    for name, (kind, what) in numbers.items():
        default = getattr(base, name)
        command.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None,
                             help=f"{what} (default: {'all' if default is None else default}; smoke: "
                                  f"{getattr(PRESETS['smoke'], name)})")
    command.add_argument("--eval-split", dest="eval_split", default=None,
                         help=f"held-out split of the learning curve (default: {base.eval_split})")
    command.add_argument("--ablate", default=None,
                         help=f"comma-separated feature groups to switch off: {', '.join(FEATURE_GROUPS)} "
                              "(default: none)")
    command.set_defaults(func=cmd_train_policy)


__all__ = ["PRESETS", "add_policy_command", "cmd_train_policy", "config_from_args"]

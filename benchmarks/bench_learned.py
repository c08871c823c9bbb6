"""The `learned` policy's figures (docs/training.md, "A policy learned by RL"): learning curves over seeds, the
ladder of baselines on held-out tasks with paired intervals, the feature-group ablation and the failure taxonomy.

Usage: python benchmarks/bench_learned.py DATA_DIR [--stages curves,ladder,ablation] [--seeds 0,1,2]
       [--episodes N] [--ablation-episodes N] [--split test] [--out docs/learned_run]
       [--weights FILE] [--runs runs/bench-learned]

Stages keep what an earlier invocation finished (a seed's or an ablation's ``curve.json``), so they resume.

- curves: ``shopsimrl train policy`` once per seed (greedy val evaluations every --eval-every episodes), each
  run's weights and curve under ``--out/seed-K``; a plot of val success and r_strict against training episodes
  (docs/images/learned_curve.png);
- ladder: ``shopsimrl eval`` of random, first, learned, heuristic, strong and oracle on ``--split`` (the learned
  row with ``--weights``, default the shipped file), then ``shopsimrl compare`` of learned against first and
  heuristic (paired bootstrap, 10,000 resamples) and each run's failure taxonomy;
- ablation: one training run per feature group switched off (seed 0, --ablation-episodes), final val figures.
Every stage writes JSON under ``--out`` (ladder.json, ablation.json, curves.json) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from shopsimrl.cli import main as cli
from shopsimrl.eval.compare import compare_runs

LADDER = ("random", "first", "learned", "heuristic", "strong", "oracle")


def _quiet_cli(argv: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli(argv)
    if code:
        raise SystemExit(f"shopsimrl {' '.join(argv)} exited {code}")


def curves(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for seed in args.seeds:
        target = args.out / f"seed-{seed}"
        argv = ["train", "policy", "--data", str(args.data), "--out", str(target), "--seed", str(seed),
                "--eval-every", str(args.eval_every)]
        if args.episodes:
            argv += ["--episodes", str(args.episodes)]
        if not (target / "curve.json").exists():  # a finished seed is kept (rerun a stage to add seeds)
            cli(argv)
        out[str(seed)] = json.loads((target / "curve.json").read_text())
    (args.out / "curves.json").write_text(json.dumps(out, indent=1) + "\n")
    baselines = val_baselines(args.data)
    (args.out / "val_baselines.json").write_text(json.dumps(baselines, indent=1) + "\n")
    plot(out, Path("docs/images/learned_curve.png"), baselines)
    print("\n| seed | episodes | val success | val r_strict | wall | episodes/s |\n|---|---|---|---|---|---|")
    for seed, run in out.items():
        last = run["curve"][-1]
        print(f"| {seed} | {last['episodes']} | {100 * last['success']:.2f}% | {last['r_strict']:.4f} | "
              f"{run['wall_s']:.0f} s | {run['episodes_per_s']:.0f} |")
    return out


def val_baselines(data: Path) -> dict[str, dict[str, float]]:
    """The trivial and rule policies on the same val tasks as the curve (greedy, in-process)."""
    from shopsimrl.agent.play import play_episode
    from shopsimrl.agent.policies import make_policy
    from shopsimrl.env.shop_env import ShopEnv, ShopWorld

    world = ShopWorld.from_data_dir(data)
    env, tasks = ShopEnv(world), world.catalog.split("val")
    out = {}
    for name in ("first", "heuristic", "strong"):
        outcomes = [play_episode(env, make_policy(name, world), task) for task in tasks]
        out[name] = {"success": sum(o.success for o in outcomes) / len(tasks),
                     "r_strict": sum(o.reward for o in outcomes) / len(tasks)}
    return out


def plot(runs: dict[str, Any], path: Path, baselines: dict[str, dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for seed, run in runs.items():
        episodes = [point["episodes"] for point in run["curve"]]
        axes[0].plot(episodes, [100 * point["success"] for point in run["curve"]], marker="o", ms=3, label=f"seed {seed}")
        axes[1].plot(episodes, [point["r_strict"] for point in run["curve"]], marker="o", ms=3, label=f"seed {seed}")
    for (name, row), style in zip(baselines.items(), (":", "--", "-."), strict=True):
        axes[0].axhline(100 * row["success"], color="grey", linestyle=style, label=name)
        axes[1].axhline(row["r_strict"], color="grey", linestyle=style, label=name)
    for axis, title in zip(axes, ("val success (%)", "val mean r_strict"), strict=True):
        axis.set_xlabel("training episodes")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, ncol=2)
    figure.suptitle("learned policy: policy gradient from random initialisation (400 persona val tasks, greedy)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def ladder(args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for policy in LADDER:
        run = args.runs / f"{policy}-{args.split}"
        env = {"SHOPSIMRL_LEARNED_WEIGHTS": str(args.weights)} if args.weights and policy == "learned" else {}
        started = time.perf_counter()
        with _env(env):
            _quiet_cli(["eval", "--data", str(args.data), "--split", args.split, "--policy", policy, "--out", str(run),
                        "--no-progress", "--no-report"])
        summary = json.loads((run / "summary.json").read_text())
        rows[policy] = {"success": summary["primary"]["success_rate"], "r_strict": summary["primary"]["reward_mean"],
                        "taxonomy": summary.get("failure_taxonomy", {}).get("causes", {}),
                        "seconds": round(time.perf_counter() - started, 1), "run": str(run)}
    compare = {base: compare_runs(str(args.runs / f"{base}-{args.split}"), str(args.runs / f"learned-{args.split}"))
               for base in ("first", "heuristic", "strong")}
    result = {"split": args.split, "rows": rows, "compare": compare}
    (args.out / "ladder.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\n| policy ({args.split}) | success | mean r_strict |\n|---|---|---|")
    for policy, row in sorted(rows.items(), key=lambda item: item[1]["r_strict"]):
        print(f"| `{policy}` | {100 * row['success']:.2f}% | {row['r_strict']:.4f} |")
    for base, table in compare.items():
        print(f"\nlearned − {base}: " + json.dumps(_intervals(table), ensure_ascii=False))
    return result


def _intervals(table: dict[str, Any]) -> dict[str, str]:
    out = {}
    for metric in ("r_strict", "r_success"):
        row = table.get("metrics", {}).get(metric) or {}
        if row:
            out[metric] = f"{row['diff']:+.4f} [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]"
    return out


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Any:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ablation(args: argparse.Namespace) -> dict[str, Any]:
    from shopsimrl.train.policy_gradient import FEATURE_GROUPS

    out: dict[str, Any] = {}
    for group in ("none", *FEATURE_GROUPS):
        target = args.out / f"ablate-{group}"
        argv = ["train", "policy", "--data", str(args.data), "--out", str(target), "--seed", "0",
                "--episodes", str(args.ablation_episodes), "--eval-every", str(args.ablation_episodes)]
        if not (target / "curve.json").exists():
            cli(argv if group == "none" else [*argv, "--ablate", group])
        out[group] = json.loads((target / "curve.json").read_text())["curve"][-1]
    (args.out / "ablation.json").write_text(json.dumps(out, indent=1) + "\n")
    print("\n| feature group off | val success | val r_strict |\n|---|---|---|")
    for group, point in out.items():
        print(f"| {group} | {100 * point['success']:.2f}% | {point['r_strict']:.4f} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--stages", default="curves,ladder,ablation")
    parser.add_argument("--seeds", type=lambda text: [int(x) for x in text.split(",")], default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=None, help="training episodes per seed (default: the recipe's)")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--ablation-episodes", type=int, default=40_000)
    parser.add_argument("--split", default="test")
    parser.add_argument("--weights", type=Path, default=None, help="the learned row's weights (default: shipped)")
    parser.add_argument("--out", type=Path, default=Path("docs/learned_run"))
    parser.add_argument("--runs", type=Path, default=Path("runs/bench-learned"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stages = {"curves": curves, "ladder": ladder, "ablation": ablation}
    for stage in args.stages.split(","):
        stages[stage](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

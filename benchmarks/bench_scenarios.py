"""The four-scenario table of the built-in policies (README's opening table, issue 27).

Usage: python benchmarks/bench_scenarios.py DATA_DIR [--split test] [--policies heuristic,strong,oracle]
       [--repeats 1,3] [--limit N] [--out runs/bench-scenarios]

Runs ``shopsimrl eval --scenarios all`` for each policy and repeat count (resuming what is already in
``--out``) and prints one markdown table: per policy and K, the strict score and success rate of each scenario
(ShopSimulator's column order), then per K > 1 the flip rate, pass^K and whether the repeats were
byte-identical, and the seconds each policy took.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from shopsimrl.cli import main as cli
from shopsimrl.eval.scenarios import SCENARIOS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--policies", default="heuristic,strong,oracle")
    parser.add_argument("--repeats", default="1,3")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-scenarios"))
    args = parser.parse_args()
    rows, extra, seconds = [], [], {}
    for k in (int(x) for x in args.repeats.split(",")):
        for policy in args.policies.split(","):
            out = args.out / f"{policy}-k{k}"
            started = time.perf_counter()
            argv = ["eval", "--data", str(args.data), "--split", args.split, "--policy", policy, "--scenarios", "all",
                    "--repeats", str(k), "--out", str(out), "--no-progress", "--no-report"]
            cli([*argv, "--limit", str(args.limit)] if args.limit else argv)
            seconds[(policy, k)] = time.perf_counter() - started
            table = json.loads((out / "scenarios.json").read_text("utf-8"))
            cells = [f"{r['strict_score']['mean']:.2f} / {r['success_rate']['mean']:.2f}" for r in table["rows"]]
            rows.append(f"| `{policy}` | {k} | " + " | ".join(cells) + f" | {seconds[(policy, k)]:.0f} s |")
            if k > 1:
                reps = [r["repeats"] for r in table["rows"]]
                extra.append(f"| `{policy}` | {k} | " + " | ".join(
                    f"{100 * rep['flip_rate']:.2f}% / {100 * rep['pass_hat_k'][str(k)]:.2f}%"
                    + (" (identical)" if rep["identical"] else "") for rep in reps) + " |")
    titles = " | ".join(s.title for s in SCENARIOS)
    print(f"\nstrict score / success rate (%), split {args.split}\n")
    print(f"| policy | K | {titles} | time |")
    print("|---|---|" + "---|" * len(SCENARIOS) + "---|")
    print("\n".join(rows))
    if extra:
        print(f"\nflip rate / pass^K over K repeats\n\n| policy | K | {titles} |")
        print("|---|---|" + "---|" * len(SCENARIOS))
        print("\n".join(extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Two source trees side by side on one data directory (issue 14): search and env-mix figures, alternating runs.

Usage: python benchmarks/compare_trees.py DATA_DIR BASE_SRC [NEW_SRC] [--reps 3] [--episodes 200]
(BASE_SRC/NEW_SRC: a ``src`` folder, e.g. of ``git worktree add /tmp/base main``; NEW_SRC defaults to this
checkout's.) Each run is a fresh process that opens DATA_DIR with one tree (the trees alternate, so a busy
machine weighs on both alike) and prints: open time, RSS after open, uncached search p50 / p99 over the
instructions of tasks 0..299 in one pass and best of 3 passes, and ``bench_env``'s scripted mix steps/s with a
cold then a warm search cache (``bench_scale.py``'s probe, in its order). Then per figure each run's value and the
new / base ratio of each pair of runs, and the load average.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
from shopsimrl.env import ShopWorld
def rss():
    with open("/proc/self/status") as h:
        return next(int(l.split()[1]) for l in h if l.startswith("VmRSS:")) / 1024
t = time.perf_counter(); world = ShopWorld.from_data_dir(sys.argv[3]); opened = time.perf_counter() - t
r = rss()
index = world.catalog.search_index; goals = world.catalog.goals
qs = [goals[i]["instruction_text"] for i in range(300) if i in goals]
def one_pass():
    out = []
    for q in qs:
        t0 = time.perf_counter(); index.search_uncached(q); out.append(time.perf_counter() - t0)
    return out
single = one_pass(); best = [min(v) for v in zip(single, one_pass(), one_pass())]
def pct(v, p):
    v = sorted(v); return 1e3 * v[min(len(v) - 1, int(len(v) * p))]
from bench_env import episode
tasks = sorted(goals)[:int(sys.argv[4])]
env = world.new_env(); rates = []
for _ in range(2):
    tm = {"search": [], "other": []}; t0 = time.perf_counter()
    for task in tasks: episode(env, task, goals[task]["name"][:12], tm)
    rates.append((len(tm["search"]) + len(tm["other"])) / (time.perf_counter() - t0))
print(json.dumps({"open_s": opened, "rss_mb": r, "p50": pct(single, .5), "p99": pct(single, .99),
  "best_p50": pct(best, .5), "best_p99": pct(best, .99), "cold": rates[0], "warm": rates[1]}))
'''
FIGURES = ("open_s", "rss_mb", "p50", "p99", "best_p50", "best_p99", "cold", "warm")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("base_src")
    parser.add_argument("new_src", nargs="?", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    trees = [("base", args.base_src), ("new", args.new_src)]
    here = str(Path(__file__).resolve().parent)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    results: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for rep in range(args.reps):
        for name, src in trees if rep % 2 == 0 else trees[::-1]:
            done = subprocess.run([sys.executable, "-c", PROBE, src, here, args.data, str(args.episodes)],
                                  capture_output=True, text=True, env=env)
            if done.returncode:
                raise SystemExit(f"{name} run failed:\n{done.stderr[-3000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            results[name].append(row)
            print(f"{name} (load {os.getloadavg()[0]:.2f}): " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()),
                  flush=True)
    for key in FIGURES:
        base = [row[key] for row in results["base"]]
        new = [row[key] for row in results["new"]]
        print(f"{key:9} base {' '.join(f'{x:.3f}' for x in base)} | new {' '.join(f'{x:.3f}' for x in new)} | "
              f"new/base {' '.join(f'{b / a:.2f}' for a, b in zip(base, new, strict=True))}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

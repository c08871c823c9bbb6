"""In-process engine benchmark: steps/s on a scripted mix, search vs non-search steps, RSS per live session.

Usage: python benchmarks/bench_env.py [--data DIR] [--n 22700] [--episodes 300] [--sessions 10000]
Without --data a synthetic catalog of --n products (see bench_search.py) is prepared in a temp directory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import tempfile
import time
from pathlib import Path

from bench_search import synthetic
from shopsimrl.catalog import PrepareOptions, prepare_dataset
from shopsimrl.env import ShopWorld


def _rss_kb() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def build(n: int, tmp: Path) -> Path:
    products = synthetic(n)
    for i, product in enumerate(products):
        product["images"] = ["https://img.shopsim.local/x.jpg"]
        product["instructions"] = [{"instruction": f"想买{product['title']}", "attributes": product["attribute"][:2],
                                    "instruction_options": [], "instruction_simple": None}]
        product["pricing"] = [10.0 + i % 90]
    archive = tmp / "bench.json.gz"
    archive.write_bytes(gzip.compress(json.dumps(products, ensure_ascii=False).encode()))
    out = tmp / "data"
    prepare_dataset(archive, out, options=PrepareOptions(test_size=0, val_size=0))
    return out


def episode(env, task_id: int, title: str, timings: dict[str, list[float]]) -> None:
    env.reset(task_id, persona=False)

    def step(kind: str, action: str):
        t0 = time.perf_counter()
        result = env.step(action)
        timings[kind].append(time.perf_counter() - t0)
        return result

    result = step("search", f"search[{title}]")
    actions = result["observation_state"]["actions"]
    step("other", "click[not-a-value]")
    if "next >" in actions:
        step("other", "click[next >]")
        step("other", "click[< prev]")
    asin = next((a for a in actions if a.isdigit()), None)
    if asin is None:
        return
    page = step("other", f"click[{asin}]")
    for option in [a for a in page["observation_state"]["actions"] if "=" in a][:2]:
        step("other", f"click[{option}]")
    step("other", "click[< prev]")
    step("other", "click[back to search]")
    step("search", f"search[{title}]")
    page = step("other", f"click[{asin}]")
    options = [a for a in page["observation_state"]["actions"] if "=" in a]
    if options:
        step("other", f"click[{options[0]}]")
    step("other", "click[buy now]")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data")
    parser.add_argument("--n", type=int, default=22_700)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else build(args.n, Path(tmp))
        world = ShopWorld.from_data_dir(data)
        tasks = sorted(world.catalog.goals)[: args.episodes]
        env = world.new_env()
        for cold_pass, label in ((True, "first pass (cold search cache)"), (False, "second pass (warm cache)")):
            timings: dict[str, list[float]] = {"search": [], "other": []}
            start = time.perf_counter()
            for task_id in tasks:
                episode(env, task_id, world.catalog.goals[task_id]["name"][:12], timings)
            total = time.perf_counter() - start
            steps = len(timings["search"]) + len(timings["other"])
            print(f"{label}: {steps} steps in {total:.2f} s = {steps / total:,.0f} steps/s (incl. resets)")
            for kind, values in timings.items():
                if values:
                    mean_ms = 1e3 * sum(values) / len(values)
                    print(f"    {kind:<6} steps {len(values):>5}  mean {mean_ms:.3f} ms  = {1e3 / mean_ms:,.0f} steps/s")
            del cold_pass
        before = _rss_kb()
        sessions = []
        for i in range(args.sessions):
            session_env = world.new_env()
            session_env.reset(tasks[i % len(tasks)], persona=False)
            session_env.step(f"search[{world.catalog.goals[tasks[i % len(tasks)]]['name'][:12]}]")
            sessions.append(session_env)
        after = _rss_kb()
        print(f"RSS growth for {len(sessions)} live sessions: {(after - before) / 1024:.1f} MiB = "
              f"{(after - before) / len(sessions):.2f} KB per session (target <= 20 KB)")


if __name__ == "__main__":
    main()

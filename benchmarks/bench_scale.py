"""Scale benchmark (issue 14): generate, prepare and open catalogs of 1×, 10× and 50× the default size.

Usage: python benchmarks/bench_scale.py [--scales 1,10,50] [--work DIR] [--keep] [--reuse] [--queries 300]
[--episodes 200]

For each scale it prints: ``data generate`` and ``data prepare`` wall time and peak RSS (each in its own
process, measured by ``wait4``), the opening time of ``ShopWorld`` (stamped, and with every file hashed),
RSS after opening, uncached search p50/p99 over a fixed query set (the instructions of tasks 0..N, which exist
at every scale), steps/s of ``bench_env``'s scripted episode mix (cold search cache, then warm), and ``serve``
start → first ``/healthz`` answer. 50× is 1,171,050 products (WebShop's scale). Nothing is stored in the repo:
catalogs go to ``--work`` (default: a temp folder, removed unless ``--keep``). Default ``--scales 1``.

Targets (this 2-core machine): open the default catalog ≤ 1 s, ``serve`` ready ≤ 2 s; at 50×: prepare ≤ 20 min
with peak ≤ 8 GB, open ≤ 5 s, RSS after open ≤ 2 GB, uncached search p99 ≤ 20 ms, the scripted mix within 2×
of its 1× steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

DEFAULT = (23_421, 695, 4_526)  # products, two-axis products, persona tasks of the default catalog
PROBE = r"""
import json, os, statistics, sys, time
sys.path.insert(0, sys.argv[3])
started = time.perf_counter()
from shopsimrl.env import ShopWorld
imported = time.perf_counter() - started

def rss_mb():
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024

started = time.perf_counter()
world = ShopWorld.from_data_dir(sys.argv[1])
opened = time.perf_counter() - started
rss = rss_mb()
index = world.catalog.search_index
goals = world.catalog.goals
queries = [goals[t]["instruction_text"] for t in range(int(sys.argv[2])) if t in goals]
times = []
for query in queries:
    t0 = time.perf_counter()
    index.search_uncached(query)
    times.append(time.perf_counter() - t0)
times.sort()
times = times or [0.0]
from bench_env import episode
tasks = sorted(goals)[: int(sys.argv[4])]
env = world.new_env()
rates = []
for _ in range(2):
    timings = {"search": [], "other": []}
    t0 = time.perf_counter()
    for task_id in tasks:
        episode(env, task_id, goals[task_id]["name"][:12], timings)
    rates.append((len(timings["search"]) + len(timings["other"])) / max(time.perf_counter() - t0, 1e-9))
print(json.dumps({
    "import_s": imported, "open_s": opened, "rss_after_open_mb": rss, "backend": index.backend,
    "queries": len(times), "search_p50_ms": 1e3 * times[len(times) // 2],
    "search_p99_ms": 1e3 * times[min(len(times) - 1, int(len(times) * 0.99))],
    "steps_per_s_cold": rates[0], "steps_per_s_warm": rates[1], "rss_end_mb": rss_mb(),
}))
"""


def _timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of a child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    return wall, usage.ru_maxrss / 1024, output


def _serve_ready(data: Path, runs: Path) -> float:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "shopsimrl.cli", "serve", "--data", str(data), "--port",
                                str(port), "--runs", str(runs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - started < 600:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return time.perf_counter() - started
            except OSError:
                if process.poll() is not None:
                    raise SystemExit("serve exited before it was ready") from None
                time.sleep(0.02)
        raise SystemExit("serve was not ready within 600 s")
    finally:
        process.terminate()
        process.wait(30)


def run_scale(scale: int, work: Path, queries: int, episodes: int, reuse: bool) -> dict[str, float]:
    products, two_axis, persona = (value * scale for value in DEFAULT)
    folder = work / f"x{scale}"
    folder.mkdir(parents=True, exist_ok=True)
    archive, data = folder / "catalog.json.gz", folder / "data"
    cli = [sys.executable, "-m", "shopsimrl.cli", "data"]
    row: dict[str, float] = {"scale": scale, "products": products}
    print(f"\n--- {scale}x: {products:,} products ---", flush=True)
    if reuse and archive.is_file():
        row["generate_s"], row["generate_peak_mb"] = float("nan"), float("nan")
        print(f"generate: reusing {archive}", flush=True)
    else:
        row["generate_s"], row["generate_peak_mb"], _ = _timed(
            [*cli, "generate", "--out", str(archive), "--products", str(products), "--two-axis-products",
             str(two_axis), "--persona-tasks", str(persona)]
        )
        print(f"generate: {row['generate_s']:.1f} s, peak {row['generate_peak_mb']:.0f} MB", flush=True)
    shutil.rmtree(data, ignore_errors=True)  # prepare from scratch every time
    row["prepare_s"], row["prepare_peak_mb"], _ = _timed([*cli, "prepare", "--archive", str(archive), "--out", str(data),
                                                         "--force"])
    print(f"prepare: {row['prepare_s']:.1f} s, peak {row['prepare_peak_mb']:.0f} MB", flush=True)
    sizes = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    row["data_dir_gb"] = sizes / 1e9
    here = str(Path(__file__).parent)
    probe = [sys.executable, "-c", PROBE, str(data), str(queries), here, str(episodes)]
    _, _, out = _timed([sys.executable, "-c", PROBE, str(data), "0", here, "0"],
                       env={**os.environ, "SHOPSIMRL_VERIFY": "full"})
    row["open_full_hash_s"] = json.loads(out.strip().splitlines()[-1])["open_s"]
    _, _, out = _timed(probe)
    row |= json.loads(out.strip().splitlines()[-1])
    print(f"open: {row['open_s']:.3f} s (every file hashed: {row['open_full_hash_s']:.3f} s, import "
          f"{row['import_s']:.2f} s), RSS after open {row['rss_after_open_mb']:.0f} MB, data dir "
          f"{row['data_dir_gb']:.2f} GB", flush=True)
    print(f"search ({row['backend']}, {row['queries']} uncached queries): p50 {row['search_p50_ms']:.2f} ms, "
          f"p99 {row['search_p99_ms']:.2f} ms", flush=True)
    print(f"scripted env mix: {row['steps_per_s_cold']:,.0f} steps/s cold cache, {row['steps_per_s_warm']:,.0f} warm; "
          f"RSS after the episodes {row['rss_end_mb']:.0f} MB", flush=True)
    row["serve_ready_s"] = _serve_ready(data, folder / "runs")
    print(f"serve start -> /healthz: {row['serve_ready_s']:.2f} s", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1", help="comma-separated multiples of the default size (e.g. 1,10,50)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the catalogs (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the generated catalogs")
    parser.add_argument("--reuse", action="store_true", help="reuse an archive already in --work (skip generate)")
    parser.add_argument("--queries", type=int, default=300, help="fixed query set: instructions of tasks 0..N-1")
    parser.add_argument("--episodes", type=int, default=200, help="scripted episodes per pass")
    args = parser.parse_args()
    scales = [int(item) for item in args.scales.split(",") if item.strip()]
    work = args.work or Path(tempfile.mkdtemp(prefix="shopsimrl-scale-"))
    rows = []
    try:
        for scale in scales:
            rows.append(run_scale(scale, work, args.queries, args.episodes, args.reuse))
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    base = rows[0]
    print("\n| scale | products | generate | prepare (peak) | open (all hashed) | RSS after open | search p50 / p99 "
          "| env steps/s cold / warm (vs first) | serve ready |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['scale']}× | {row['products']:,} | {row['generate_s']:.0f} s | {row['prepare_s']:.0f} s "
              f"({row['prepare_peak_mb'] / 1024:.2f} GB) | {row['open_s']:.2f} s ({row['open_full_hash_s']:.2f} s) | "
              f"{row['rss_after_open_mb']:.0f} MB | {row['search_p50_ms']:.1f} / {row['search_p99_ms']:.1f} ms | "
              f"{row['steps_per_s_cold']:,.0f} / {row['steps_per_s_warm']:,.0f} "
              f"({row['steps_per_s_cold'] / base['steps_per_s_cold']:.2f}×) | {row['serve_ready_s']:.2f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

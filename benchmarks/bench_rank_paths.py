"""The in-memory ranking's exact paths side by side on a prepared data directory (issue 14, search at scale).

Usage: python benchmarks/bench_rank_paths.py [--data DIR] [--queries 300] [--names 200] [--repeat 3]
(default ``--data``: the repository's ``data/default``; without it the script says so and stops)

Queries: the instructions of tasks 0..N-1 (``bench_scale.py``'s fixed set) and the first 12 characters of the
first product names (``bench_env.py``'s scripted mix). Each query is ranked (k = 150) by every path: ``before``
(a fresh per-row array and a pass over every row for each query, the ranking before pruning), ``summed``,
``scanned`` and ``pruned`` (``search._postings``), and ``auto`` (what ``rank`` picks); each must give the same
hits as ``before``. Printed: per path and query set, mean / p50 / p99 of the best of ``--repeat`` runs in ms, by
postings per query, and the ratio to ``before``. The thresholds that choose a path come from such runs on the
1x, 10x and 50x catalogs.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from shopsimrl.env import ShopWorld
from shopsimrl.search import search_tokens
from shopsimrl.search._phrases import Phrase
from shopsimrl.search._postings import Postings

Ranked = list[tuple[int, float]] | None


def paths(p: Postings) -> dict[str, Callable[[Sequence[str]], Ranked]]:
    def phrases(tokens: Sequence[str]) -> list[Phrase]:
        return [x for x in (p._phrase(t) for t in tokens) if x is not None and x.docs.size]

    def before(tokens: Sequence[str]) -> Ranked:
        scores = np.zeros(p.n_rows, dtype=np.float64)
        for phrase in phrases(tokens):
            scores[phrase.docs] += phrase.terms
        candidates = np.flatnonzero(scores > 0.0)
        return p._top(candidates, scores[candidates], 150)

    def summed(tokens: Sequence[str]) -> Ranked:
        found = phrases(tokens)
        return p._top(*p._summed(found), 150) if found else []

    def scanned(tokens: Sequence[str]) -> Ranked:
        found = phrases(tokens)
        return p._top(*p._scanned(found), 150) if found else []

    def pruned(tokens: Sequence[str]) -> Ranked:
        found = phrases(tokens)
        return p._pruned(found, 150) if len(found) > 1 else p.rank(tokens, 150)

    return {"before": before, "summed": summed, "scanned": scanned, "pruned": pruned,
            "auto": lambda tokens: p.rank(tokens, 150)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "default")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--names", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not (args.data / "manifest.json").is_file():
        print(f"no prepared data directory at {args.data} (shopsimrl data build-default, or pass --data)")
        return 0
    world = ShopWorld.from_data_dir(args.data)
    postings = world.catalog.search_index.postings
    if postings is None:
        raise SystemExit("this index ranks with SQLite: no in-memory paths to compare")
    goals = world.catalog.goals
    sets = {
        "instructions": [search_tokens(goals[t]["instruction_text"]) for t in range(args.queries) if t in goals],
        "name prefixes": [search_tokens(goals[t]["name"][:12]) for t in sorted(goals)[: args.names]],
    }
    print(f"{args.data}: {postings.n_rows:,} rows")
    ways = paths(postings)
    for label, queries in sets.items():
        sizes = np.array([sum(x.docs.size for x in (postings._phrase(t) for t in q) if x is not None) for q in queries])
        expected = [ways["before"](q) for q in queries]
        best: dict[str, np.ndarray] = {}
        for name, way in ways.items():
            times = np.full(len(queries), np.inf)
            for _ in range(args.repeat):
                for i, tokens in enumerate(queries):
                    start = time.perf_counter()
                    result = way(tokens)
                    times[i] = min(times[i], time.perf_counter() - start)
                    if result != expected[i]:
                        raise SystemExit(f"{name} differs from before on {tokens}")
            best[name] = times * 1e3
        print(f"\n{label}: {len(queries)} queries, postings per query median {int(np.median(sizes)):,}, "
              f"max {int(sizes.max()):,}; every path gave the same hits")
        for name, times in best.items():
            print(f"  {name:<8} mean {times.mean():6.3f}  p50 {np.percentile(times, 50):6.3f}  p99 "
                  f"{np.percentile(times, 99):6.3f} ms  (mean / before {times.mean() / best['before'].mean():.2f})")
        edges = [0, 5_000, 20_000, 50_000, 100_000, 300_000, 10**12]
        for low, high in itertools.pairwise(edges):
            chosen = (sizes >= low) & (sizes < high)
            if chosen.any():
                cells = "  ".join(f"{name} {times[chosen].mean():.3f}" for name, times in best.items())
                print(f"  postings [{low:,}, {high:,}) x{int(chosen.sum())}: {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

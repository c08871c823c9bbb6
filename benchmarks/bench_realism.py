"""Realism benchmark: the realism figures of the generated default catalog (see shopsimrl.generate.realism).

Usage: python benchmarks/bench_realism.py [--seed S] [--annotations FILE]

Prints one line per figure, and with ``--annotations`` (the real budget_annotations.json) the real archive's
distinct budget shapes next to the generator's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from shopsimrl.generate import DEFAULT_SEED, GENERATOR_VERSION, build_catalog
from shopsimrl.generate.realism import real_budget_shape_counts, realism_figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--annotations", type=Path, default=None, help="real budget_annotations.json")
    args = parser.parse_args()
    started = time.perf_counter()
    catalog = build_catalog(args.seed)
    print(f"{GENERATOR_VERSION}: generated {len(catalog.records)} products in {time.perf_counter() - started:.1f} s")
    for name, value in realism_figures(catalog.records, catalog.audits).items():
        print(f"{name}: {value:.4f}")
    if args.annotations:
        real = json.loads(args.annotations.read_text("utf-8"))
        counts = real_budget_shape_counts(real)
        print(f"real budget_shapes: {len(counts)}, singletons {sum(n == 1 for n in counts.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

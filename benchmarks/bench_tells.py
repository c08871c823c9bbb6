"""v8 tells benchmark (issue 41): budgets that bind, persona price fields, option-order prior, broken text, cues.

Usage: python benchmarks/bench_tells.py [--seed S] [--annotations FILE] [--examples N]

Generates the default catalog in memory and prints one line per figure of ``shopsimrl.generate.tells`` (the same
code measured generator v7.1 and v8); with ``--annotations`` the real annotations' range figures and shape count
on the same span of tasks; ``--examples`` prints that many broken-text examples.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from shopsimrl.generate import DEFAULT_SEED, GENERATOR_VERSION, build_catalog
from shopsimrl.generate.realism import budget_shape
from shopsimrl.generate.tells import SPAN, real_range_figures, tells_figures
from shopsimrl.generate.text_check import catalog_text_problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--annotations", type=Path, default=None, help="real budget_annotations.json")
    parser.add_argument("--examples", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    catalog = build_catalog(args.seed)
    print(f"{GENERATOR_VERSION}: generated {len(catalog.records)} products in {time.perf_counter() - started:.1f} s")
    for name, value in tells_figures(catalog.records, catalog.audits, catalog.confusers).items():
        print(f"{name}: {value:.4f}")
    if args.annotations:
        real = json.loads(args.annotations.read_text("utf-8"))
        shapes = {budget_shape(str(a["evidence"])) for a in real if a.get("evidence") and a["task_id"] <= SPAN}
        print(f"real budget_shapes_span: {len(shapes)}")
        for name, value in real_range_figures(real).items():
            print(f"real {name}: {value:.4f}")
    for problem in catalog_text_problems(catalog.records)[: args.examples]:
        print("example:", problem)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

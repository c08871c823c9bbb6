"""Generator benchmark: time to generate and write the default catalog, its shape, and (optionally) prepare + recall.

Usage: python benchmarks/bench_generate.py [--seed S] [--out DIR] [--prepare]

Prints the generation time (records only), the write time (JSON dump + gzip + manifest), the counts of the
manifest, and with ``--prepare`` the ``shopsimrl data prepare`` time and the gold-ASIN Recall@20 of the persona
test split with ``instruction_simple`` and with the full instruction (real catalog: 69.07% and 85.71%).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from shopsimrl.generate import DEFAULT_SEED, build_catalog, catalog_statistics, write_catalog


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=None, help="folder for the archive (default: a temp folder)")
    parser.add_argument("--prepare", action="store_true", help="also prepare the catalog and measure recall")
    args = parser.parse_args()

    started = time.perf_counter()
    catalog = build_catalog(args.seed)
    generated = time.perf_counter() - started
    stats = catalog_statistics(catalog)
    print(f"generate (records only): {generated:.2f} s for {stats['raw_products']} products")

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        archive = folder / "default_catalog.json.gz"
        started = time.perf_counter()
        manifest = write_catalog(archive, args.seed)
        written = time.perf_counter() - started
        print(f"generate + write (json.gz + manifest): {written:.2f} s, {archive.stat().st_size / 1e6:.1f} MB")
        print(json.dumps(manifest["counts"], ensure_ascii=False, sort_keys=True))
        if args.prepare:
            from shopsimrl.catalog.prepare import prepare_dataset
            from shopsimrl.catalog.retrieval import evaluate_split

            started = time.perf_counter()
            prepared = prepare_dataset(archive, folder / "prepared")
            print(f"prepare: {time.perf_counter() - started:.2f} s; splits {prepared['stats']['split_sizes']}")
            metrics = evaluate_split(folder / "prepared", "test")["metrics"]
            print(
                f"persona test Recall@20: simple {metrics['simple']['recall_at_20']:.4f}, "
                f"full {metrics['full']['recall_at_20']:.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

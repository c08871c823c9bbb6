"""The ``shopsimrl`` command line: a thin layer that parses flags and calls the library."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ShopSimError


def _print_json(payload: object) -> None:
    print(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True))


def _progress(message: str) -> None:
    print(f"[shopsimrl] {message}", file=sys.stderr, flush=True)


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from .catalog.prepare import PrepareOptions, prepare_dataset

    options = PrepareOptions(
        test_size=args.test_size, val_size=args.val_size, seed=args.seed,
        annotations=Path(args.annotations) if args.annotations else None,
    )
    manifest = prepare_dataset(args.archive, args.out, options=options, force=args.force, progress=_progress)
    if manifest.get("up_to_date"):
        _progress(f"{args.out} is already prepared from this archive with these settings; nothing to do")
    stats = manifest["stats"]
    print(
        f"prepared {args.out}: {stats['cleaned_product_count']} products "
        f"({stats['excluded_product_count']} excluded), {stats['active_task_count']} active tasks, "
        f"persona splits {stats['split_sizes']}"
    )
    return 0


def cmd_data_info(args: argparse.Namespace) -> int:
    from .catalog.prepare import MANIFEST_FILE

    path = Path(args.dir) / MANIFEST_FILE
    if not path.is_file():
        raise ShopSimError(f"{args.dir} is not a prepared data directory (no {MANIFEST_FILE})")
    manifest = json.loads(path.read_text("utf-8"))
    if args.json:
        _print_json(manifest)
        return 0
    stats = manifest["stats"]
    print(f"data directory   {args.dir}")
    print(f"schema           {manifest['schema_version']}  (environment {manifest['environment_version']})")
    print(f"source archive   {manifest['source_archive']}  sha256 {manifest['source_archive_sha256'][:16]}…")
    print(f"data sha256      {manifest['output_data_sha256']}")
    for key in (
        "source_product_count", "cleaned_product_count", "excluded_product_count", "source_task_count",
        "active_task_count", "persona_task_count", "standard_task_count", "annotated_task_count",
    ):
        print(f"{key:<24} {stats[key]}")
    print(f"budget sources           {stats['budget_sources']}")
    print(f"persona splits           {stats['split_sizes']}")
    return 0


def cmd_data_search(args: argparse.Namespace) -> int:
    from .catalog.store import Catalog

    catalog = Catalog.from_data_dir(args.dir)
    hits = catalog.search_index.search(args.query, k=args.k)
    if args.json:
        print(json.dumps([{"rank": h.rank, "asin": h.asin, "score": h.score} for h in hits], ensure_ascii=False))
        return 0
    products = catalog.products_by_asin
    for hit in hits:
        title = products[hit.asin].title if hit.asin in products else ""
        print(f"{hit.rank:>4}  {hit.asin}  {hit.score:10.4f}  {title}")
    if not hits:
        print("no results")
    return 0


def cmd_data_eval_search(args: argparse.Namespace) -> int:
    from .catalog.retrieval import evaluate_split

    report = evaluate_split(args.dir, args.split, top_k=args.top_k)
    if args.json:
        _print_json(report)
        return 0
    print(f"split {report['split']}  top_k {report['top_k']}  ({report['metric_scope']})")
    for mode, metrics in report["metrics"].items():
        figures = "  ".join(
            f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}" for key, value in metrics.items()
        )
        print(f"  {mode:<6} {figures}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    result = run_demo(args.archive, args.out)
    return 0 if result.get("done") else 1


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .env.shop_env import ShopWorld
    from .server import create_app

    if args.workers != 1:
        raise ShopSimError("--workers > 1 is not supported yet: a lease must reach the process holding its session")
    world = ShopWorld.from_data_dir(args.data)
    app = create_app(world, slots=args.slots, idle_timeout=args.idle_timeout or None)
    _progress(f"serving {len(world.catalog.goals)} tasks on http://{args.host}:{args.port}/api/shop_agent")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shopsimrl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="prepare, inspect and search catalogs").add_subparsers(
        dest="data_command", required=True
    )
    prepare = data.add_parser("prepare", help="validate → clean → budgets → splits → index")
    prepare.add_argument("--archive", required=True, help="ShopSimulator archive (.json or .json.gz)")
    prepare.add_argument("--out", required=True, help="output data directory")
    prepare.add_argument("--annotations", help="precomputed budget annotations (budget_annotations.json format)")
    prepare.add_argument("--test-size", type=int, default=400)
    prepare.add_argument("--val-size", type=int, default=400)
    prepare.add_argument("--seed", type=int, default=20260829, help="persona split seed")
    prepare.add_argument("--force", action="store_true", help="rebuild a directory that holds other data")
    prepare.set_defaults(func=cmd_data_prepare)

    info = data.add_parser("info", help="show a prepared data directory's manifest")
    info.add_argument("dir")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_data_info)

    search = data.add_parser("search", help="ranked ASINs for a query")
    search.add_argument("dir")
    search.add_argument("query")
    search.add_argument("--k", type=int, default=20)
    search.add_argument("--json", action="store_true", help="print [{rank, asin, score}] (score = -bm25)")
    search.set_defaults(func=cmd_data_search)

    evaluate = data.add_parser("eval-search", help="gold-ASIN retrieval proxy over a split")
    evaluate.add_argument("dir")
    evaluate.add_argument("--split", default="test")
    evaluate.add_argument("--top-k", type=int, default=150)
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(func=cmd_data_eval_search)

    serve = commands.add_parser("serve", help="HTTP service: the reference /api/shop_agent API with leased sessions")
    serve.add_argument("--data", default="data/fixture", help="a prepared data directory")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=5700)
    serve.add_argument("--slots", type=int, default=256)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an unused lease is reclaimed (0: never)")
    serve.set_defaults(func=cmd_serve)

    demo = commands.add_parser("demo", help="prepare a catalog and play one scripted episode to a purchase")
    demo.add_argument("--archive", default="tests/data/fixture_catalog.json")
    demo.add_argument("--out", default="data/fixture")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ShopSimError as exc:
        print(f"shopsimrl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

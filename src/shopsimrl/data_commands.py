"""The ``data`` commands: prepare, info, search, eval-search, generate, build-default, stats and tiers (registered
by ``shopsimrl.cli``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .cli_data import add_data_argument, check_data, resolve_data
from .cli_shared import episode_bars, positive_int, say
from .errors import ShopSimError


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``data`` and its subcommands."""
    data = commands.add_parser("data", help="prepare, inspect and search catalogs").add_subparsers(
        dest="data_command", required=True
    )
    prepare = data.add_parser("prepare", help="validate → clean → budgets → splits → index")
    prepare.add_argument("--archive", required=True, help="ShopSimulator archive (.json or .json.gz)")
    prepare.add_argument("--out", required=True, help="output data directory")
    prepare.add_argument("--annotations",
                         help="precomputed budget annotations: a JSON list of records {task_id, kind, amount, "
                              "price_upper, evidence} (docs/contract.md#budget-annotations shows one)")
    prepare.add_argument("--test-size", type=int, default=None, help="default: 400, scaled down for small catalogs")
    prepare.add_argument("--val-size", type=int, default=None, help="default: 400, scaled down for small catalogs")
    prepare.add_argument("--seed", type=int, default=20260829, help="persona split seed")
    prepare.add_argument("--force", action="store_true", help="rebuild a directory that holds other data")
    prepare.set_defaults(func=cmd_data_prepare)

    info = data.add_parser("info", help="show a prepared data directory's manifest")
    add_data_argument(info, positional="dir")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    info.set_defaults(func=cmd_data_info)

    search = data.add_parser("search", help="ranked ASINs for a query")
    add_data_argument(search, positional="dir")
    search.add_argument("query", help="search text, as an agent would type it")
    search.add_argument("--k", type=positive_int, default=20, help="number of results (at least 1)")
    search.add_argument("--json", action="store_true", help="print [{rank, asin, score}] (score = -bm25)")
    search.set_defaults(func=cmd_data_search)

    evaluate = data.add_parser("eval-search", help="gold-ASIN retrieval proxy over a split")
    add_data_argument(evaluate, positional="dir")
    evaluate.add_argument("--split", default="test", help="task split whose gold ASINs are looked for")
    evaluate.add_argument("--top-k", type=positive_int, default=150, help="results retrieved per query")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.set_defaults(func=cmd_data_eval_search)

    generate = data.add_parser("generate", help="write the generated default catalog's raw archive (+ manifest)")
    generate.add_argument("--out", required=True, help="archive path (.json.gz: deterministic gzip; else JSON)")
    generate.add_argument("--seed", type=int, default=20240521, help="generator seed (same seed: same bytes)")
    generate.add_argument("--products", type=positive_int, default=23421, help="raw products to generate")
    generate.add_argument("--two-axis-products", type=int, default=None, help="default: 695/23421 of --products")
    generate.add_argument("--persona-tasks", type=int, default=None, help="default: 4526/23421 of --products")
    generate.set_defaults(func=cmd_data_generate)

    build_default = data.add_parser("build-default", help="generate + prepare the default catalog (cached)")
    build_default.add_argument("--out", default=None,
                               help="data directory to write (or reuse) (default: the default catalog in the user "
                                    "cache directory, the one every command's --data defaults to)")
    build_default.add_argument("--seed", type=int, default=20240521, help="generator seed")
    build_default.add_argument("--force", action="store_true",
                               help="generate and prepare again from scratch, also over a directory holding other data")
    build_default.set_defaults(func=cmd_data_build_default)

    stats = data.add_parser("stats", help="catalog statistics, oracle solvability and heuristic difficulty")
    add_data_argument(stats, positional="dir")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.add_argument("--oracle-sample", type=positive_int, help="play the oracle on the first N tasks (default: all)")
    stats.add_argument("--workers", type=positive_int, help="worker processes (default: CPU count)")
    stats.add_argument("--no-cache", action="store_true", help="recompute even if DIR/stats.json matches")
    stats.set_defaults(func=cmd_data_stats)

    tiers = data.add_parser("tiers", help="difficulty tier of every task (first / heuristic / strong / none), "
                                          "stored in DIR/difficulty_tiers.json for --difficulty filters")
    add_data_argument(tiers, positional="dir")
    tiers.add_argument("--json", action="store_true", help="print the tier counts as JSON")
    tiers.add_argument("--workers", type=positive_int, help="worker processes (default: CPU count)")
    tiers.add_argument("--no-cache", action="store_true", help="recompute even if the stored tiers match")
    tiers.set_defaults(func=cmd_data_tiers)


def _print_json(payload: object) -> None:
    print(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True))


def cmd_data_prepare(args: argparse.Namespace) -> int:
    from .catalog.prepare import PrepareOptions, prepare_dataset

    options = PrepareOptions(
        test_size=args.test_size, val_size=args.val_size, seed=args.seed,
        annotations=Path(args.annotations) if args.annotations else None,
    )
    manifest = prepare_dataset(args.archive, args.out, options=options, force=args.force, progress=say)
    if manifest.get("up_to_date"):
        say(f"{args.out} is already prepared from this archive with these settings; nothing to do")
    stats = manifest["stats"]
    print(
        f"prepared {args.out}: {stats['cleaned_product_count']} products "
        f"({stats['excluded_product_count']} excluded), {stats['active_task_count']} active tasks, "
        f"persona splits {stats['split_sizes']}"
    )
    return 0


def cmd_data_info(args: argparse.Namespace) -> int:
    from .catalog.prepare import MANIFEST_FILE
    from .jsonfile import read_json_file

    args.dir = resolve_data(args.dir)
    path = Path(args.dir) / MANIFEST_FILE
    if not path.exists():
        raise ShopSimError(f"{args.dir} is not a prepared data directory (no {MANIFEST_FILE})")
    manifest = read_json_file(path)
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

    args.dir = resolve_data(args.dir)
    check_data(args.dir)
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

    args.dir = resolve_data(args.dir)
    check_data(args.dir, args.split)
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


def cmd_data_generate(args: argparse.Namespace) -> int:
    from .generate import GeneratorConfig, manifest_path_for, write_catalog

    config = GeneratorConfig(
        products=args.products, two_axis_products=args.two_axis_products, persona_tasks=args.persona_tasks
    )
    say(f"generating {config.products} products (seed {args.seed})")
    manifest = write_catalog(args.out, args.seed, config)
    counts = manifest["counts"]
    print(
        f"wrote {args.out} ({counts['raw_products']} products, {counts['two_axis_products']} with two price axes, "
        f"{counts['persona_tasks']} persona tasks) sha256 {manifest['archive_sha256'][:16]}…; "
        f"manifest {manifest_path_for(Path(args.out))}"
    )
    return 0


def cmd_data_build_default(args: argparse.Namespace) -> int:
    from .generate.default import build_default_catalog

    if args.out is None:  # the user cache's copy, under its lock (what --data opens when it is not given)
        from .generate import user_cache

        args.out = str(user_cache.default_catalog_dir(args.seed))
        if args.force:
            (Path(args.out) / user_cache.COMPLETE_FILE).unlink(missing_ok=True)
        current = user_cache.is_complete(Path(args.out), args.seed)
        user_cache.ensure_default_catalog(seed=args.seed, events=user_cache.BuildEvents(stage=say))
        manifest = json.loads((Path(args.out) / "manifest.json").read_text("utf-8")) | {"up_to_date": current}
    else:
        manifest = build_default_catalog(args.out, seed=args.seed, force=args.force, regenerate=args.force,
                                         progress=say)
    stats = manifest["stats"]
    state = "up to date" if manifest.get("up_to_date") else "built"
    print(
        f"default catalog {args.out} {state}: {stats['cleaned_product_count']} products, "
        f"{stats['persona_task_count']} persona / {stats['standard_task_count']} standard tasks, "
        f"persona splits {stats['split_sizes']}"
    )
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    from .agent.difficulty import STATS_FILE, cached_statistics, data_statistics

    args.dir = resolve_data(args.dir)
    check_data(args.dir)
    stats = None if args.no_cache else cached_statistics(args.dir, oracle_sample=args.oracle_sample)
    if stats is not None:
        say(f"statistics of {args.dir}: read from {Path(args.dir) / STATS_FILE} (cached; --no-cache recomputes)")
    else:
        say(f"statistics of {args.dir}: opening the catalog, then the oracle on every task and the heuristic "
                  f"on the test split (cached in {STATS_FILE})")
        with episode_bars(args.json) as progress:
            stats = data_statistics(
                args.dir, oracle_sample=args.oracle_sample, workers=args.workers, use_cache=False,
                progress=progress,
            )
    if args.json:
        print(json.dumps(stats, ensure_ascii=False, sort_keys=True))
        return 0
    _print_stats(stats)
    return 0


def cmd_data_tiers(args: argparse.Namespace) -> int:
    from .agent.tier_cascade import compute_tiers

    args.dir = resolve_data(args.dir)
    check_data(args.dir)
    with episode_bars(args.json) as progress:
        document = compute_tiers(args.dir, workers=args.workers, use_cache=not args.no_cache, progress=progress)
    counts = document["counts"]
    if args.json:
        print(json.dumps(counts, sort_keys=True))
        return 0
    total = sum(counts.values())
    print(f"difficulty tiers of {args.dir} ({total} tasks; tier = the first policy that solves the task):")
    for tier, n in counts.items():
        print(f"  {tier:<10} {n:>6}  {100 * n / total if total else 0:6.2f}%")
    return 0


def _print_stats(stats: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="catalog statistics", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("raw products", stats["raw_products"]),
        ("products (after cleaning)", stats["products"]),
        ("excluded (two price axes)", stats["excluded_products"]),
        ("persona / standard tasks", f"{stats['persona_tasks']} / {stats['standard_tasks']}"),
        ("persona split train / val / test", " / ".join(str(stats["splits"][k]) for k in ("train", "val", "test"))),
        ("domains / leaf categories", f"{stats['domains']} / {stats['leaf_categories']}"),
        ("leaf size min / median / max",
         f"{stats['leaf_size_min']} / {stats['leaf_size_median']:g} / {stats['leaf_size_max']}"),
        ("budget kinds", ", ".join(f"{k} {v}" for k, v in stats["budget_kinds"].items())),
        ("instruction length full (mean)", f"{stats['instruction_length_full']['mean']:.1f}"),
        ("instruction length simple (mean)", f"{stats['instruction_length_simple']['mean']:.1f}"),
        ("oracle success (solvability)", f"{stats['oracle_success']:.2%} of {stats['oracle']['tasks']} tasks"),
        ("heuristic success (public info, test)", f"{stats['public_success']:.2%} of {stats['public']['tasks']}"),
        ("Recall@20 simple / full (test)",
         f"{stats['recall_at_20_simple']:.2%} / {stats['recall_at_20_full']:.2%}"),
        ("persona tasks decidable from public info",
         "n/a" if stats.get("decidable_share") is None
         else f"{stats['decidable_share']:.2%} of {stats['decidable_checked_tasks']}"),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    Console().print(table)

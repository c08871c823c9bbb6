"""The ``shopsimrl`` command line: a thin layer that parses flags and calls the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from .cli_data import add_data_argument, check_data, resolve_data
from .cli_shared import say
from .data_commands import add_commands as add_data_commands
from .errors import ShopSimError

if TYPE_CHECKING:
    from .server.guard import Guard


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    if args.archive is not None:
        result = run_demo(args.archive, args.out)
    else:  # the fixture shipped in the package, so `demo` works from a wheel as from a checkout
        from importlib.resources import as_file, files

        with as_file(files("shopsimrl") / FIXTURE_NAME) as fixture:
            result = run_demo(fixture, args.out)
    return 0 if result.get("done") else 1


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .env.shop_env import ShopWorld
    from .server import create_app
    from .server._protocol import KEEP_ALIVE_S, http_protocol

    if args.workers < 1:
        raise ShopSimError("--workers must be at least 1")
    guard = _serve_guard(args)
    from .dialogue.llm_shopper import ShopperEndpoint, shopper_settings_from_args

    shopper = shopper_settings_from_args(args)  # shopper "llm" on both APIs (None: refused with a 400)
    from .server.ports import check_port_free, check_port_range

    check_port_range(args.port)  # before the catalog is opened (or built)
    args.data = resolve_data(args.data)
    check_data(args.data)
    args.port = check_port_free(args.host, args.port)  # 0: the free port the kernel chose
    if args.workers > 1:  # a front process routes each request to the worker holding its lease
        from .server._workers import serve_workers

        say(f"serving on http://{args.host}:{args.port} with {args.workers} worker processes ({args.slots} slots)")
        serve_workers(data=args.data, host=args.host, port=args.port, slots=args.slots, workers=args.workers,
                      idle_timeout=args.idle_timeout or None, wait_timeout=args.wait_timeout, runs=args.runs,
                      log_level=args.log_level, progress=say, guard=guard,
                      max_response_chars=args.max_response_chars, header_timeout=args.header_timeout,
                      body_timeout=args.body_timeout,
                      shopper=shopper)
        return 0
    world = ShopWorld.from_data_dir(args.data)
    app = create_app(
        world, slots=args.slots, idle_timeout=args.idle_timeout or None, reset_wait_timeout=args.wait_timeout,
        runs_dir=args.runs, guard=guard, max_response_chars=args.max_response_chars,
        llm_shopper=ShopperEndpoint(shopper) if shopper is not None else None,
    )
    base = f"http://{args.host}:{args.port}"
    say(f"serving {len(world.catalog.goals)} tasks on {base}/api/shop_agent ({args.slots} slots)")
    say(f"agent view {base}/debug-ui · experiment replay {base}/replay-ui (runs: {args.runs}) · API docs {base}/docs")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.log_level == "debug",
                proxy_headers=False, server_header=False, date_header=False, timeout_keep_alive=KEEP_ALIVE_S,
                http=http_protocol(args.header_timeout, args.body_timeout))
    return 0


def _serve_guard(args: argparse.Namespace) -> Guard:
    """The admission rules from the command line (server/edge.py: the same on every server command)."""
    from .server.edge import guard_from_args

    if args.max_response_chars < 1:
        raise ShopSimError("--max-response-chars must be positive")
    return guard_from_args(args)


def _add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``serve``: the HTTP service's flags (the admission rules of ``server/edge.py``, the LLM shopper's)."""
    serve = commands.add_parser("serve", help="HTTP service: the reference /api/shop_agent API with leased sessions")
    add_data_argument(serve)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (a non-loopback one needs --api-key-env or --insecure)")
    from .server.ports import add_port_argument

    add_port_argument(serve, 5700)
    serve.add_argument("--slots", type=int, default=256, help="environment slots (concurrent leased sessions)")
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes behind a front that routes by lease (default 1: one process)")
    serve.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an unused lease is reclaimed (0: never)")
    serve.add_argument("--wait-timeout", type=float, default=None,
                       help="default seconds a reset waits for a free slot before 503 (default: wait forever)")
    serve.add_argument("--runs", default="runs", help="runs directory shown read-only by the replay UI")
    serve.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                       help="uvicorn log level (debug also logs each request)")
    from .server.edge import add_edge_arguments

    limits = add_edge_arguments(serve)
    limits.add_argument("--max-response-chars", type=int, default=65_536,
                        help="longest response/action text of one step (default 65536; 413 beyond)")
    from .dialogue.llm_shopper import add_shopper_arguments

    add_shopper_arguments(serve.add_argument_group("LLM shopper (dialogue mode, shopper \"llm\")"), cache=True)
    serve.set_defaults(func=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shopsimrl", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)

    add_data_commands(commands)  # data prepare, info, search, eval-search, generate, build-default, stats, tiers
    _add_serve_command(commands)
    demo = commands.add_parser("demo", help="prepare a catalog and play one scripted episode to a purchase")
    demo.add_argument("--archive", default=None,
                      help="archive to prepare (default: the 17-product fixture catalog shipped in the package, "
                           f"shopsimrl/{FIXTURE_NAME}; tests/data/ links to it)")
    demo.add_argument("--out", default="data/fixture", help="data directory to write")
    demo.set_defaults(func=cmd_demo)

    from .eval.commands import add_commands as add_eval_commands  # eval, compare, report, policy-server

    add_eval_commands(commands)
    from .train.commands import add_commands as add_train_commands  # export-sft

    add_train_commands(commands)
    from .openenv.command import add_command as add_openenv_command  # serve-openenv

    add_openenv_command(commands)
    for each in parsers(parser):
        each.formatter_class = DefaultsHelpFormatter
    return parser


FIXTURE_NAME = "fixture_catalog.json"  # the seed's worked example, package data (pyproject's package-data)
DESCRIPTION = "ShopSimRL: a deterministic local shop simulator for training and evaluating LLM shopping agents."


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it names the default itself or has none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        shown = action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        if shown and "default" not in text and not no_default(default):
            text += " (default: %(default)s)"
        return text


def no_default(value: object) -> bool:
    """An option with nothing to show as its default: unset, a flag's off state, an empty list (not 0 or 0.0,
    which compare equal to False but are real defaults)."""
    return value is None or value is False or value == [] or value is argparse.SUPPRESS


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ShopSimError as exc:
        print(f"shopsimrl: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `shopsimrl data info DIR | head`: the reader left; stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except OSError as exc:  # a file the user named cannot be read or written (permissions, a directory, disk full)
        print(f"shopsimrl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""``shopsimrl serve-openenv``: the OpenEnv server (imports ``openenv`` only when the command runs)."""

from __future__ import annotations

import argparse
from typing import Any

from ..cli_data import add_data_argument, resolve_data
from ..errors import ShopSimError

INSTALL_HINT = "the OpenEnv server needs the openenv extra: pip install 'shopsimrl[openenv]'"


def cmd_serve_openenv(args: argparse.Namespace) -> int:
    from ..catalog.store import check_data_dir

    args.data = resolve_data(args.data)
    check_data_dir(args.data)
    try:
        from .server import serve_openenv
    except ImportError as exc:
        raise ShopSimError(f"{INSTALL_HINT} ({exc})") from exc
    if args.slots < 1:
        raise ShopSimError("--slots must be at least 1")
    serve_openenv(args.data, host=args.host, port=args.port, slots=args.slots)
    return 0


def add_command(commands: Any) -> None:
    parser = commands.add_parser("serve-openenv", help="OpenEnv server (WebSocket sessions; needs the openenv extra)")
    add_data_argument(parser)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--slots", type=int, default=8, help="concurrent sessions (OpenEnv's max_concurrent_envs)")
    parser.set_defaults(func=cmd_serve_openenv)

"""``shopsimrl serve-openenv``: the OpenEnv server (imports ``openenv`` only when the command runs)."""

from __future__ import annotations

import argparse
from typing import Any

from ..cli_data import add_data_argument, resolve_data
from ..errors import ShopSimError

INSTALL_HINT = "the OpenEnv server needs the openenv extra: pip install 'shopsimrl[openenv]'"


def cmd_serve_openenv(args: argparse.Namespace) -> int:
    from ..catalog.store import check_data_dir
    from ..server.edge import guard_from_args
    from ..server.ports import check_port_free, check_port_range

    guard = guard_from_args(args, open_paths=frozenset({"/health", "/healthz"}))  # the same rules as serve
    check_port_range(args.port)  # before the catalog is opened (or built)
    args.data = resolve_data(args.data)
    check_data_dir(args.data)
    args.port = check_port_free(args.host, args.port)  # 0: the free port the kernel chose
    try:
        from .server import serve_openenv
    except ImportError as exc:
        raise ShopSimError(f"{INSTALL_HINT} ({exc})") from exc
    if args.slots < 1:
        raise ShopSimError("--slots must be at least 1")
    if args.idle_timeout < 0:
        raise ShopSimError("--idle-timeout must be 0 (never) or a number of seconds")
    import sys

    print(f"[shopsimrl] OpenEnv server on http://{args.host}:{args.port} ({args.slots} slots)", file=sys.stderr,
          flush=True)
    serve_openenv(args.data, host=args.host, port=args.port, slots=args.slots, guard=guard,
                  idle_timeout=args.idle_timeout or None, max_message_bytes=args.max_message_bytes,
                  uvicorn_options=_uvicorn_options(args))
    return 0


def _uvicorn_options(args: argparse.Namespace) -> dict[str, Any]:
    from ..server.edge import uvicorn_options

    return uvicorn_options(args)


def add_command(commands: Any) -> None:
    parser = commands.add_parser("serve-openenv", help="OpenEnv server (WebSocket sessions; needs the openenv extra)")
    add_data_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    from ..server.ports import add_port_argument

    add_port_argument(parser, 8010)
    parser.add_argument("--slots", type=int, default=8, help="concurrent sessions (OpenEnv's max_concurrent_envs)")
    parser.add_argument("--idle-timeout", type=float, default=600.0,
                        help="seconds a WebSocket may send nothing before its session is closed and freed (0: never)")
    from ..server.edge import add_edge_arguments

    add_edge_arguments(parser, websocket=True)
    parser.set_defaults(func=cmd_serve_openenv)

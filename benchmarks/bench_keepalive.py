"""Keep-alive probe (issue 25 item 5): 16 sessions step for 2 minutes after idle gaps of 4.90-5.10 s, i.e. at
the edge of httpx's 5 s keep-alive expiry, against a real uvicorn server.

Prints failed steps and steps the server executed twice for: the previous setting (server keep-alive 5 s,
one attempt per step, no step index), the shipped one (server keep-alive ``KEEP_ALIVE_S``, the client's
step-index retry) and the retry alone at the old 5 s server setting. Run:

    PYTHONPATH=src:tests python benchmarks/bench_keepalive.py [--seconds 120] [--data DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from keepalive_probe import run_probe  # noqa: E402
from shopsimrl.catalog import PrepareOptions, prepare_dataset  # noqa: E402
from shopsimrl.env import ShopWorld  # noqa: E402
from shopsimrl.server._protocol import KEEP_ALIVE_S  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--data", help="a prepared data directory (default: the test fixture catalog)")
    args = parser.parse_args(argv)
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp()) / "fixture"
    if not args.data:
        prepare_dataset(ROOT / "tests" / "data" / "fixture_catalog.json", data,
                        options=PrepareOptions(test_size=2, val_size=2))
    world = ShopWorld.from_data_dir(data)
    print(f"{args.sessions} sessions x {args.seconds:.0f} s, idle gaps 4.90-5.10 s")
    print(f"{'setting':58s} {'steps':>6s} {'failed':>7s} {'twice':>6s}")
    for label, keep_alive, retrying in (
        ("before: server keep-alive 5 s, one attempt, no step index", 5.0, False),
        (f"after: server keep-alive {KEEP_ALIVE_S} s, step-index retry", KEEP_ALIVE_S, True),
        ("retry alone: server keep-alive 5 s, step-index retry", 5.0, True),
    ):
        result = run_probe(world, sessions=args.sessions, seconds=args.seconds, gaps=(4.90, 5.10),
                           keep_alive=keep_alive, retrying=retrying)
        print(f"{label:58s} {result.steps:6d} {result.failed:7d} {result.executed_twice:6d}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

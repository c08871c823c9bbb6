"""Budget parser time against input size: every phrase family, repeated n, 4n and 16n times.

A linear parser takes about 4× longer for 4× the text; the script prints each family's times and the ratios
(16n / 4n), and exits 1 when a ratio exceeds ``--max-ratio`` (default 6: noise allowance over 4).

Usage: ``python benchmarks/bench_budget_scaling.py [--base N] [--max-ratio R]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable

from shopsimrl.budget import parse_budget_detail

FAMILIES = (
    "价格在70元左右，", "两三块", "三十几块的那种", "几块", "1元以内或", "付五百元左右的定金", "80元左右一斤",
    "租金300以内", "花个30块", "130-140元之间", "不超过一千八", "每平米850块", "\n", "9",
    # issue 28: one long numeral token (cubic before the one-pass reader and the token cap)
    "1万", "十百千万", "一万二千", "块元", "后续补170元左右的",
)


def best_time(call: Callable[[], object], repeats: int = 3) -> float:
    """Best CPU time of ``repeats`` runs of ``call`` (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def seconds(text: str, repeats: int = 3) -> float:
    return best_time(lambda: parse_budget_detail(text), repeats)


def ratio_report(rows: Iterable[tuple[str, Callable[[int], float]]], base: int, max_ratio: float,
                 width: int = 14) -> int:
    """Print each row's time at ``base`` × 1, 4 and 16 and the 16n/4n ratio; 1 when a ratio passes ``max_ratio``."""
    worst = 0.0
    print(f"{'family':<{width}} {'n':>8} {'4n':>8} {'16n':>8}  ratio 16n/4n")
    for label, timed in rows:
        times = [timed(base * factor) for factor in (1, 4, 16)]
        ratio = times[2] / max(times[1], 1e-9)
        worst = max(worst, ratio)
        print(f"{label:<{width}} " + " ".join(f"{t * 1000:7.1f}ms" for t in times) + f"  {ratio:5.1f}")
    print(f"worst ratio {worst:.1f} (linear: 4; limit {max_ratio})")
    return 0 if worst <= max_ratio else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=2000, help="repetitions of the smallest input")
    parser.add_argument("--max-ratio", type=float, default=6.0)
    args, _ = parser.parse_known_args(argv)
    rows = [(repr(unit), lambda n, unit=unit: seconds(unit * n)) for unit in FAMILIES]
    return ratio_report(rows, args.base, args.max_ratio)


if __name__ == "__main__":
    raise SystemExit(main())

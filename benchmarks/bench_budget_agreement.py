"""Agreement of the budget parser with the LLM budget annotations of the real catalog (docs/contract.md#budget-annotations, #budget-parser).

For every record with non-empty evidence, ``parse_budget(evidence)`` is compared with the annotated
``price_upper`` (None == null; floats after ``round(., 8)``). Prints the agreement figure, the counts per
annotated and parsed kind, and the disagreement classes with examples.

Usage: ``python benchmarks/bench_budget_agreement.py [ANNOTATIONS.json] [--examples N]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from shopsimrl.budget import BUDGET_PARSER_VERSION, parse_budget_detail

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = (
    REPO / "tests" / "data" / "budget_annotations.json",
    REPO.parent / "shared" / "data" / "budget_annotations.json",
)


def same_ceiling(expected: float | None, got: float | None) -> bool:
    """The comparison the agreement figure uses."""
    if expected is None or got is None:
        return expected is None and got is None
    return round(float(expected), 8) == round(got, 8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, help="budget_annotations.json")
    parser.add_argument("--examples", type=int, default=3, help="examples printed per disagreement class")
    args = parser.parse_args(argv)
    path = args.path or next((p for p in CANDIDATES if p.exists()), None)
    if path is None or not path.exists():
        print("budget_annotations.json not found; pass its path", file=sys.stderr)
        return 2
    records = json.loads(path.read_text(encoding="utf-8"))
    measured = [r for r in records if r.get("evidence")]
    annotated_kinds: Counter[str] = Counter(r["kind"] for r in records)
    parsed_kinds: Counter[str] = Counter()
    classes: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    agree = 0
    for record in measured:
        detail = parse_budget_detail(record["evidence"])
        assert detail is not None
        parsed_kinds[detail.kind] += 1
        if same_ceiling(record["price_upper"], detail.price_upper):
            agree += 1
            continue
        key = (record["kind"], detail.kind, detail.reason)
        classes[key].append(
            f"{record['evidence']!r}: annotated {record['price_upper']}, parsed {detail.price_upper}"
        )
    print(f"parser {BUDGET_PARSER_VERSION}; file {path}")
    print(f"records {len(records)}, with evidence {len(measured)}")
    print(f"agreement {agree}/{len(measured)} = {agree / len(measured):.4%}")
    print("annotated kinds (all records):", dict(annotated_kinds.most_common()))
    print("parsed kinds (records with evidence):", dict(parsed_kinds.most_common()))
    print(f"disagreements: {len(measured) - agree}")
    for (annotated, parsed, reason), examples in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(examples):3d}  annotated {annotated} / parsed {parsed} ({reason})")
        for example in examples[: args.examples]:
            print(f"         {example}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Rewrite the catalog-dependent lines of ``openenv.yaml`` from a built default catalog (after a generator change).

    python scripts/openenv_manifest.py [--data DIR] [--check]

``task_distribution`` (generator version and seed) and ``declared_task_count`` (tasks per split) are pins of the
default catalog; the rest of the manifest is hand-written. ``--data`` defaults to the user-cache default catalog
(built on first use); ``--check`` exits 1 instead of writing when the file is out of date.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "openenv.yaml"


def pinned_lines(data: Path) -> dict[str, str]:
    """The manifest lines (by key) that this catalog implies."""
    from shopsimrl.env import ShopWorld
    from shopsimrl.generate import DEFAULT_SEED, GENERATOR_VERSION

    catalog = ShopWorld.from_data_dir(data).catalog
    counts = ", ".join(f"{name}: {len(catalog.split(name))}" for name in sorted(catalog.split_names))
    return {"dataset_version": GENERATOR_VERSION, "generator_seed": str(DEFAULT_SEED),
            "declared_task_count": "{" + counts + "}"}


def rewrite(text: str, lines: dict[str, str]) -> str:
    for key, value in lines.items():
        text, n = re.subn(rf"^(\s+{key}: )[^#\n]*?(\s*(#.*)?)$", rf"\g<1>{value}\g<2>", text, count=1,
                          flags=re.MULTILINE)
        if n != 1:
            raise SystemExit(f"openenv.yaml has no `{key}:` line")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="data directory (default: the user-cache catalog)")
    parser.add_argument("--check", action="store_true", help="exit 1 if openenv.yaml is out of date; write nothing")
    args = parser.parse_args()
    if args.data is None:
        from shopsimrl.generate.user_cache import ensure_default_catalog

        args.data = ensure_default_catalog()
    text = MANIFEST.read_text("utf-8")
    new = rewrite(text, pinned_lines(args.data))
    if args.check:
        if new != text:
            print("openenv.yaml is out of date: run python scripts/openenv_manifest.py", file=sys.stderr)
            return 1
        return 0
    MANIFEST.write_text(new, "utf-8")
    print(json.dumps(pinned_lines(args.data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

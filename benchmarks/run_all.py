"""Run every benchmark script in this folder (``bench_*.py``) one after the other; each prints its figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    failures = 0
    for script in sorted(Path(__file__).parent.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        failures += subprocess.call([sys.executable, str(script), *sys.argv[1:]]) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

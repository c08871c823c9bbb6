"""Regenerate the pictures the README shows: the agent view mid-episode and one evaluation-report figure.

Both come from the hand-written fixture catalog (``tests/data/fixture_catalog.json``: the seed's worked example,
a mobile snack cart), so they are the same on every machine: the agent view is Debian's chromium driven by
Playwright against a live ``serve`` app (``make test`` installs both), the figure is the report's
success-by-category chart of a heuristic run (Chinese names drawn with Debian's fonts-wqy-microhei).

Usage: ``python scripts/docs_figures.py [--out docs/images]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "fixture_catalog.json"
CHROMIUM = os.environ.get("SHOPSIM_CHROMIUM", "/usr/bin/chromium")
QUERY = "可移动小吃车 煤气灶 三个锅"
PRODUCT = "824100258497"


def agent_view(data: Path, target: Path) -> None:
    """The agent view on the product page of the worked example, after one search and one click."""
    sys.path.insert(0, str(ROOT / "tests"))
    from playwright.sync_api import sync_playwright

    from live_server import serve  # the tests' real uvicorn-in-a-thread helper
    from shopsimrl.env import ShopWorld
    from shopsimrl.server import create_app

    with serve(create_app(ShopWorld.from_data_dir(data), slots=2)) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.goto(f"{base}/debug-ui")
        page.wait_for_selector("#health.ok")
        page.wait_for_function("document.querySelectorAll('#task-select option').length > 0")
        page.select_option("#task-select", "0")
        page.check("input[name=mode][value=persona]")
        page.click("#start")
        page.wait_for_function("document.getElementById('observation').textContent.startsWith('页面：搜索首页')")
        page.fill("#search-input", QUERY)
        page.click("#search-button")
        product = page.locator(f"#actions button[data-value='{PRODUCT}']")
        product.wait_for()
        product.click()
        page.wait_for_function("document.getElementById('observation').textContent.startsWith('页面：商品详情')")
        page.screenshot(path=str(target))
        browser.close()


def report_figure(data: Path, work: Path, target: Path) -> None:
    """The success-by-category chart of the heuristic over every fixture task."""
    from shopsimrl.cli import main

    run = work / "runs" / "heuristic-all"
    code = main(["eval", "--data", str(data), "--split", "all", "--policy", "heuristic", "--out", str(run),
                 "--no-progress"])
    if code not in (0, 1):
        raise SystemExit(f"eval failed ({code})")
    shutil.copyfile(run / "report_figures" / "categories.png", target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="folder for the PNG files")
    args = parser.parse_args(argv)
    from shopsimrl.catalog import PrepareOptions, prepare_dataset

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "fixture"
        prepare_dataset(FIXTURE, data, options=PrepareOptions(test_size=2, val_size=2))  # as tests/conftest.py
        report_figure(data, work, args.out / "report-categories.png")
        agent_view(data, args.out / "agent-view.png")
    for name in ("agent-view.png", "report-categories.png"):
        print(f"wrote {args.out / name} ({(args.out / name).stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

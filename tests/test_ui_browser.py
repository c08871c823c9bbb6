"""End-to-end browser tests: Playwright driving Debian's chromium against a live server.

Playwright cannot download its own browsers here, so chromium is launched by path (``make setup`` installs the
Debian package). Screenshots of every stage are written to ``test-artifacts/ui/`` (or $SHOPSIM_TEST_ARTIFACTS).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from live_server import serve
from shopsimrl.env import ShopWorld
from shopsimrl.server import create_app

CHROMIUM = os.environ.get("SHOPSIM_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("SHOPSIM_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts")) / "ui"
RUNS = Path(__file__).parent / "data" / "runs"
QUERY = "可移动小吃车 煤气灶 三个锅"
OPTION = "颜色分类=三锅小吃车煮面炉＋关东煮＋油炸"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)),
    reason=f"chromium not found at {CHROMIUM} (install Debian's chromium: bash scripts/ensure_chromium.sh)",
)


@pytest.fixture(scope="module")
def base(prepared_dir):
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=2, runs_dir=RUNS)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    # bypass_csp: Playwright's own waits evaluate strings in the page, which the UIs' CSP forbids (it is checked
    # without the bypass in test_pages_run_under_their_content_security_policy)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN", bypass_csp=True)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _free_slots(base: str) -> int:
    return httpx.get(f"{base}/healthz").json()["free_slots"]


def test_agent_view_plays_an_episode_to_a_purchase_by_clicking(page, base):
    page.goto(f"{base}/debug-ui")
    page.wait_for_selector("#health.ok")
    page.wait_for_function("document.querySelectorAll('#task-select option').length > 0")
    page.select_option("#task-select", "0")
    page.check("input[name=mode][value=persona]")
    page.click("#start")
    page.wait_for_function("document.getElementById('observation').textContent.startsWith('页面：搜索首页')")
    assert "小吃车" in page.inner_text("#task-instruction")
    assert "u_3538" in page.inner_text("#persona")  # the persona is shown (its user id)
    assert '"page_type": "search_home"' in page.inner_text("#observation-state")
    assert _free_slots(base) == 1
    _shot(page, "agent-1-reset")

    page.fill("#search-input", QUERY)
    page.click("#search-button")
    product = page.locator("#actions button[data-value='824100258497']")
    product.wait_for()
    assert "页面：搜索结果" in page.inner_text("#observation") and "executed" in page.inner_text("#feedback")
    _shot(page, "agent-2-results")

    product.click()
    option = page.locator(f"#actions button[data-value='{OPTION}']")
    option.wait_for()
    assert "页面：商品详情" in page.inner_text("#observation")
    assert page.locator("#actions button[data-value='buy now']").count() == 0  # options not complete yet
    _shot(page, "agent-3-product")

    option.click()
    buy = page.locator("#actions button[data-value='buy now']")
    buy.wait_for()
    assert "颜色分类：已选择" in page.inner_text("#observation")
    buy.click()
    page.wait_for_selector("#reward-card:not([hidden])")
    assert page.inner_text("#reward-value") == "reward 1.000"
    panel = page.inner_text("#reward-panel")
    for needle in ("r_strict", "r_att", "r_option", "r_price", "price_verifiable", "target_asin_match", "purchase"):
        assert needle in panel, needle
    assert page.inner_text("#asin-verdict") == "ASIN MATCH"
    compare = page.inner_text("#purchase-vs-goal")
    assert compare.count("824100258497") == 2 and "三锅小吃车煮面炉＋关东煮＋油炸" in compare
    assert page.locator("#trace li").count() == 4
    _shot(page, "agent-4-reward")

    page.goto("about:blank")  # leaving the page releases the lease (keepalive fetch)
    deadline = time.monotonic() + 5
    while _free_slots(base) != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _free_slots(base) == 2


def test_agent_view_shows_invalid_feedback_and_releases_on_button(page, base):
    page.goto(f"{base}/debug-ui")
    page.wait_for_function("document.querySelectorAll('#task-select option').length > 0")
    page.fill("#task-id", "3")
    page.check("input[name=mode][value=standard]")
    page.click("#start")
    page.wait_for_function("document.getElementById('persona').textContent.includes('standard mode')")
    page.fill("#action-input", "click[nothing]")
    page.press("#action-input", "Enter")
    page.wait_for_selector("#feedback.invalid")
    assert "unavailable_action" in page.inner_text("#feedback") or "invalid" in page.inner_text("#feedback")
    page.press("#action-input", "ArrowUp")
    assert page.input_value("#action-input") == "click[nothing]"
    _shot(page, "agent-5-invalid")
    page.click("#release")
    deadline = time.monotonic() + 5
    while _free_slots(base) != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _free_slots(base) == 2 and page.inner_text("#lease") == "no session"


def test_replay_view_steps_through_a_recorded_episode(page, base):
    page.goto(f"{base}/replay-ui")
    run = page.locator("#runs li[data-run='fixture-run']")
    run.wait_for()
    _shot(page, "replay-1-runs")
    run.click()
    page.wait_for_selector("#run-card:not([hidden])")
    assert page.locator("#episodes tr.selectable").count() == 3
    summary = page.inner_text("#run-summary")
    assert "scripted-fixture-policy" in summary and "0.333" in summary
    _shot(page, "replay-2-run")

    page.click("#episodes tr[data-episode='task-000009__sample-000']")
    page.wait_for_selector("#outcomeComparison:not([hidden])")
    assert page.inner_text("#step-counter") == "step 1 / 6"
    assert "防水睫毛膏" in page.inner_text("#step-reasoning")
    assert "search" in page.inner_text("#step-tool-call") and "卷翘 睫毛膏" in page.inner_text("#step-tool-call")
    assert "页面：搜索结果" in page.inner_text("#step-observation")
    assert page.is_disabled("#prev-step")
    seen = [page.inner_text("#step-feedback")]
    for number in range(2, 7):
        page.click("#next-step")
        page.wait_for_function(f"document.getElementById('step-counter').textContent === 'step {number} / 6'")
        seen.append(page.inner_text("#step-feedback"))
        if number == 2:
            assert "protocol error" in page.inner_text("#step-tool-call")
            _shot(page, "replay-3-protocol-error")
    assert page.is_disabled("#next-step")
    assert "incomplete_options" in seen[3]  # buy before choosing a colour
    assert "页面：任务已终止" in page.inner_text("#step-observation")
    outcome = page.inner_text("#outcomeComparison")
    assert "目标商品 vs 实际购买" in outcome and "ASIN DIFFERENT" in outcome
    assert "611000000001" in outcome and "611000000002" in outcome
    assert "Gold truth option" in outcome and "棕色" in outcome and "missing" in outcome
    _shot(page, "replay-4-outcome")
    page.click("#prev-step")
    assert page.inner_text("#step-counter") == "step 5 / 6"


def test_api_docs_render_with_the_network_blocked(page, base):
    """/docs must not need a CDN: every request outside this server is aborted, and Swagger UI still renders."""
    outside: list[str] = []

    def only_this_server(route) -> None:
        if route.request.url.startswith(base):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_this_server)
    page.goto(f"{base}/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=15_000)
    assert "ShopSimRL environment service" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock-summary-path[data-path=\"/v1/sessions\"]")
    assert "/api/shop_agent" in page.inner_text(".swagger-ui")
    _shot(page, "api-docs-offline")
    assert outside == [], f"/docs asked for outside resources: {outside}"


def test_agent_view_refuses_a_persona_reset_of_a_standard_task(page, base):
    page.goto(f"{base}/debug-ui")
    page.wait_for_selector("#health.ok")
    page.fill("#task-id", "1")  # fixture task 1 has no persona
    page.check("input[name=mode][value=persona]")
    page.click("#start")
    page.wait_for_selector("#error:not([hidden])")
    assert "task 1 has no persona" in page.inner_text("#error")
    assert "task 1 has no persona" in page.inner_text("#persona")  # not a silent "standard mode"
    assert _free_slots(base) == 2
    page.check("input[name=mode][value=standard]")
    page.click("#start")
    page.wait_for_function("document.getElementById('observation').textContent.startsWith('页面：搜索首页')")
    assert "standard mode" in page.inner_text("#persona")
    page.click("#release")


# ---------------------------------------------------------------- issue 13 item 9: what each pane shows


def _runner_style_runs(tmp_path: Path) -> Path:
    """The fixture run rewritten as the runner writes traces (tool calls with ``name``/``arguments`` at the top
    level, as ``ToolCall.record`` stores them), with episode ids that contain ``/``."""
    import json

    runs = tmp_path / "runs"
    target = runs / "runner-run"
    target.mkdir(parents=True)
    source = RUNS / "fixture-run"
    for name in ("manifest.json", "summary.json"):
        (target / name).write_bytes((source / name).read_bytes())
    lines = []
    for line in (source / "traces.jsonl").read_text("utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # the fixture's deliberately broken line stays as it is
            lines.append(line)
            continue
        record["episode_id"] = record["episode_id"].replace("__", "/")
        for step in record["steps"]:
            model = step.get("model") or {}
            calls = []
            for call in model.get("tool_calls") or []:
                raw = call["function"]["arguments"]
                try:
                    arguments = json.loads(raw)
                except ValueError:  # the fixture's malformed call (a protocol error step)
                    arguments = None
                calls.append({"id": call["id"], "name": call["function"]["name"], "arguments": arguments,
                              "raw_arguments": raw})
            if calls:
                model["tool_calls"] = calls
        lines.append(json.dumps(record, ensure_ascii=False))
    (target / "traces.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return runs


def test_replay_shows_runner_tool_calls_and_opens_episode_ids_with_slashes(browser, prepared_dir, tmp_path):
    runs = _runner_style_runs(tmp_path)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with serve(create_app(ShopWorld.from_data_dir(prepared_dir), slots=1, runs_dir=runs)) as url:
        page.goto(f"{url}/replay-ui")
        page.locator("#runs li[data-run='runner-run']").click()
        page.wait_for_selector("#run-card:not([hidden])")
        page.click("#episodes tr[data-episode='task-000009/sample-000']")
        page.wait_for_selector("#outcomeComparison:not([hidden])")
        assert page.inner_text("#step-counter") == "step 1 / 6"
        tool_call = page.inner_text("#step-tool-call")
        assert "undefined" not in tool_call
        assert tool_call.startswith('search({"query": "') and "卷翘 睫毛膏" in tool_call
        assert "→ search[" in tool_call
        assert "防水睫毛膏" in page.inner_text("#step-reasoning")
        assert page.inner_text("#step-feedback").startswith("✓ executed")
        assert page.inner_text("#step-observation").startswith("页面：搜索结果")
        page.click("#next-step")
        page.wait_for_function("document.getElementById('step-counter').textContent === 'step 2 / 6'")
        assert "protocol error" in page.inner_text("#step-tool-call")
        page.click("#next-step")
        page.wait_for_function("document.getElementById('step-counter').textContent === 'step 3 / 6'")
        assert page.inner_text("#step-tool-call").startswith('click({"value": ')
        assert "ASIN DIFFERENT" in page.inner_text("#outcomeComparison")
        _shot(page, "replay-runner-traces")
    context.close()
    assert not errors, errors


def test_agent_view_keeps_the_started_task_id_and_the_picker_fits_its_card(browser, base):
    context = browser.new_context(viewport={"width": 760, "height": 1000}, bypass_csp=True)
    page = context.new_page()
    held: list = []
    page.route("**/v1/tasks*", lambda route: held.append(route))  # the task list arrives only after Start
    page.goto(f"{base}/debug-ui")
    page.wait_for_selector("#health.ok")
    page.fill("#task-id", "3")
    page.check("input[name=mode][value=standard]")
    page.click("#start")
    page.wait_for_function("document.getElementById('observation').textContent.startsWith('页面：搜索首页')")
    assert held, "the task list request was not held"
    for route in held:
        route.continue_()
    page.wait_for_function("document.querySelectorAll('#task-select option').length >= 5")
    assert page.input_value("#task-id") == "3"  # not reset to the first task while task 3 runs
    assert page.input_value("#task-select") == "3"
    assert "task 3" not in page.inner_text("#error")
    overflow = page.evaluate("""() => {
        const select = document.getElementById('task-select');
        const card = select.closest('.card') || select.parentElement;
        return select.getBoundingClientRect().right - card.getBoundingClientRect().right;
    }""")
    assert overflow <= 0, f"the task picker overflows its card by {overflow}px"
    page.click("#release")
    context.close()


@pytest.mark.parametrize("path", ["/debug-ui", "/replay-ui"])
def test_pages_run_under_their_content_security_policy(browser, base, path):
    """The UIs work with their CSP enforced: no violation is reported and their scripts fill the page."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.on("pageerror", lambda exc: messages.append(str(exc)))
    page.goto(base + path)
    page.wait_for_load_state("networkidle")
    if path == "/replay-ui":  # its script fetched the run list and drew it
        page.locator("#runs li[data-run='fixture-run']").wait_for(timeout=10_000)
    assert not [m for m in messages if "Content Security Policy" in m or "Refused" in m], messages
    context.close()

"""Dialogue mode in the browser UIs (issue 16 item 7): Playwright driving Debian's chromium against a live server.

Agent view: a dialogue episode started from the view (``shopper=rule``), the shopper's opening and each question
and reply in order, questions asked by hand through ``ask_user`` (the reference API the page already uses), the
input disabled once ``ask_user`` is no longer offered. Replay view: questions and replies in the turn list.
Shopper and model text is shown as text, never as HTML (checked with injected markup).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from live_server import serve
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.eval import EvalSettings, evaluate
from shopsimrl.eval.rundir import latest_records
from shopsimrl.server import create_app

CHROMIUM = os.environ.get("SHOPSIM_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("SHOPSIM_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts")) / "ui"
TASK = 3  # a persona task of the fixture catalog (a mini fridge: budget, two attributes, one option)
INJECTED = '<img src=x onerror="window.__pwned=1"><b id="bold">预算</b>'

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)),
    reason=f"chromium not found at {CHROMIUM} (install Debian's chromium: bash scripts/ensure_chromium.sh)",
)


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def runs(world: ShopWorld, prepared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real dialogue run (the dialogue heuristic against the rule shopper) plus one trace whose shopper and
    model text carries markup."""
    root = tmp_path_factory.mktemp("runs")
    evaluate(EvalSettings(data=str(prepared_dir), out=str(root / "dialogue-run"), split="all", limit=3, concurrency=1,
                          policy="dialogue-heuristic", shopper="rule", max_steps=40), world=world)
    evaluate(EvalSettings(data=str(prepared_dir), out=str(root / "plain-run"), split="all", limit=1, concurrency=1,
                          policy="heuristic"), world=world)
    traces = root / "dialogue-run" / "traces.jsonl"
    record = json.loads(json.dumps(next(iter(latest_records(traces).values()))))
    record["episode_id"] = "task-999999__sample-000"
    record["job"]["task_id"] = 999999
    record["dialogue"]["opening"] = INJECTED + "开场"
    first = record["dialogue"]["turns"][0]
    first["question"], first["reply"] = INJECTED + "问", INJECTED + "答"
    for step in record["steps"]:
        step["model"]["reasoning"] = INJECTED
    with traces.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return root


@pytest.fixture(scope="module")
def base(world: ShopWorld, runs: Path) -> Iterator[str]:
    with serve(create_app(world, slots=2, runs_dir=runs)) as url:
        yield url


@pytest.fixture(scope="module")
def browser(runs: Path) -> Iterator[Any]:
    """Started after ``runs``: Playwright's sync API keeps an event loop running, and ``evaluate`` needs its own."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN", bypass_csp=True)  # Playwright evaluates strings (CSP: test_ui_browser)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    assert opened.evaluate("window.__pwned") is None, "injected markup ran"
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _fmt(value: float) -> str:
    """A number as the replay view prints it (integers bare, else three decimals)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def _dialogue(page: Any) -> list[str]:
    return [" ".join(text.split()) for text in page.locator("#dialogue li").all_inner_texts()]


def _open_agent_view(page: Any, base: str) -> None:
    page.goto(f"{base}/debug-ui")
    page.wait_for_selector("#health.ok")
    page.wait_for_function("document.querySelectorAll('#task-select option').length > 0")


def _start_dialogue(page: Any, task: int) -> None:
    page.select_option("#shopper", "rule")
    page.fill("#task-id", str(task))
    page.check("input[name=mode][value=persona]")
    page.click("#start")
    page.wait_for_selector("#dialogue-card:not([hidden])")
    page.wait_for_function("document.querySelectorAll('#dialogue li').length === 1")


def _ask(page: Any, question: str, entries: int) -> None:
    page.fill("#ask-input", question)
    page.press("#ask-input", "Enter")
    page.wait_for_function(f"document.querySelectorAll('#dialogue li').length === {entries}")


def test_agent_view_plays_a_dialogue_by_hand_until_the_question_limit(page: Any, base: str, world: ShopWorld) -> None:
    mirror = ShopEnv(world, shoppers=shopper_registry())  # the same episode in process: what the page must show, in order
    reset = mirror.reset(TASK, persona=True, shopper="rule")
    goal = world.catalog.goal(TASK)
    _open_agent_view(page, base)
    plain_label = page.inner_text(f"#task-select option[value='{TASK}']")
    assert goal["instruction_simple"][:10] in plain_label  # the picker previews the request ...
    page.select_option("#shopper", "rule")
    assert page.input_value("#interaction-mode") == "multi_turn" and page.is_disabled("#interaction-mode")
    assert page.inner_text(f"#task-select option[value='{TASK}']") == f"{TASK} · persona"  # ... not in dialogue mode
    _start_dialogue(page, TASK)
    assert "withheld" in page.inner_text("#task-instruction")
    assert goal["instruction_simple"] not in page.inner_text("body")
    assert _dialogue(page) == [f"顾客 · rule {reset['shopper_opening']}"]
    assert page.is_enabled("#ask-input") and "0/10" in page.inner_text("#ask-note")
    assert '"ask_user_available": true' in page.inner_text("#observation-state")
    _shot(page, "dialogue-1-opening")

    questions = ["你的预算是多少？", INJECTED, "有什么具体要求吗？", "还有别的吗？", "颜色有要求吗？",
                 "容量要多大？", "可以下单吗？", "喜欢什么天气？", "还有吗？", "规格呢？"]  # fmt: skip
    expected = [f"顾客 · rule {reset['shopper_opening']}"]
    for number, question in enumerate(questions, start=1):
        reply = mirror.step(f"ask_user[{question}]")["shopper_reply"]
        expected += [f"问 {question}", f"答 {reply}"]
        _ask(page, question, 1 + 2 * number)
        assert page.inner_text("#feedback").startswith("✓ executed")
        if number == 2:  # markup from the user is text: no element was made, the text shows verbatim
            assert page.locator("#dialogue img, #dialogue b, #bold").count() == 0
            assert page.locator("#dialogue li .said").nth(3).inner_text() == INJECTED
            _shot(page, "dialogue-2-escaped")
    assert _dialogue(page) == expected
    assert page.is_disabled("#ask-input") and page.is_disabled("#ask-button")  # ask_user is no longer offered
    assert "question limit" in page.inner_text("#ask-note") and "10/10" in page.inner_text("#dialogue-count")
    assert "提问次数已用完" in page.inner_text("#observation")
    assert page.locator("#trace li").count() == len(questions)
    _shot(page, "dialogue-3-limit")

    page.fill("#action-input", "ask_user[还能问吗？]")  # typed by hand after the limit: refused, shown as refused
    page.press("#action-input", "Enter")
    page.wait_for_selector("#dialogue li.invalid")
    assert "ask_user_unavailable" in page.inner_text("#dialogue li.invalid")
    assert "ask_user_unavailable" in page.inner_text("#feedback")
    page.click("#release")
    page.select_option("#shopper", "")
    assert page.is_enabled("#interaction-mode")
    page.fill("#task-id", str(TASK))
    page.click("#start")
    page.wait_for_function(f"document.getElementById('task-instruction').textContent === {json.dumps(goal['instruction_simple'])}")
    assert page.is_hidden("#dialogue-card") and page.is_disabled("#ask-input")
    page.click("#release")


def test_agent_view_buys_in_a_dialogue_and_shows_the_slots_revealed(page: Any, base: str, world: ShopWorld) -> None:
    mirror = ShopEnv(world, shoppers=shopper_registry())
    mirror.reset(0, persona=True, shopper="rule")
    actions = ["ask_user[预算多少？]", "search[可移动小吃车 煤气灶 三个锅]", "click[824100258497]",
               "click[颜色分类=三锅小吃车煮面炉＋关东煮＋油炸]", "click[buy now]"]  # fmt: skip
    final = [mirror.step(action) for action in actions][-1]
    assert final["termination_reason"] == "purchase"
    _open_agent_view(page, base)
    _start_dialogue(page, 0)
    _ask(page, "预算多少？", 3)
    page.fill("#search-input", "可移动小吃车 煤气灶 三个锅")
    page.click("#search-button")
    page.locator("#actions button[data-value='824100258497']").click()
    page.locator("#actions button[data-value='颜色分类=三锅小吃车煮面炉＋关东煮＋油炸']").click()
    page.locator("#actions button[data-value='buy now']").click()
    page.wait_for_selector("#reward-card:not([hidden])")
    summary = page.inner_text("#reward-summary")
    revealed = f"{final['dialogue']['slots_revealed']} / {final['dialogue']['slots_total']}"
    assert f"slots revealed\t{revealed}" in summary and "questions asked\t1" in summary
    assert page.is_disabled("#ask-input") and page.inner_text("#ask-note").startswith("episode over")
    assert len(_dialogue(page)) == 3  # the shop actions are not part of the dialogue
    _shot(page, "dialogue-4-purchase")


def test_agent_view_shows_shopper_text_as_text(page: Any, base: str) -> None:
    """Whatever a shopper says (an LLM shopper may say anything) is shown as text: the server's answers are
    rewritten in flight with markup in the opening and the reply."""

    def inject(route: Any) -> None:
        response = route.fetch()
        payload = response.json()
        result = payload.get("result") or {}
        if "shopper_opening" in result:
            result["shopper_opening"] = INJECTED + "开场"
        if result.get("shopper_reply"):
            result["shopper_reply"] = INJECTED + "回复"
        route.fulfill(response=response, json=payload)

    page.route("**/api/shop_agent", inject)
    _open_agent_view(page, base)
    _start_dialogue(page, TASK)
    _ask(page, "预算多少？", 3)
    assert _dialogue(page) == [f"顾客 · rule {INJECTED}开场", "问 预算多少？", f"答 {INJECTED}回复"]
    assert page.locator("#dialogue-card img, #dialogue-card b").count() == 0
    page.click("#release")
    page.wait_for_function("document.getElementById('lease').textContent === 'no session'")
    page.unroute_all(behavior="ignoreErrors")


def test_replay_view_shows_questions_and_replies_in_the_turn_list(page: Any, base: str, runs: Path) -> None:
    records = latest_records(runs / "dialogue-run" / "traces.jsonl")
    record = next(r for r in records.values() if r["job"]["task_id"] != 999999 and r["dialogue"]["turns"])
    turns = record["dialogue"]["turns"]
    page.goto(f"{base}/replay-ui")
    page.locator("#runs li[data-run='dialogue-run']").click()
    page.wait_for_selector("#run-card:not([hidden])")
    summary = json.loads((runs / "dialogue-run" / "summary.json").read_text("utf-8"))["dialogue"]
    shown = page.inner_text("#run-summary")
    assert "shopper\trule" in shown
    assert f"questions / episode\t{_fmt(summary['questions_per_episode'])}" in shown
    assert f"slot recall\t{_fmt(summary['slot_recall'])}" in shown
    row = page.locator(f"#episodes tr[data-episode='{record['episode_id']}'] td")
    assert page.inner_text("#episodes tr th:nth-child(6)") == "questions"
    assert row.nth(5).inner_text() == str(len(turns))  # the questions column (dialogue runs only)
    page.click(f"#episodes tr[data-episode='{record['episode_id']}']")
    page.wait_for_selector("#outcomeComparison:not([hidden])")
    assert "instruction was withheld" in page.inner_text("#episode-instruction")
    items = page.locator("#turn-list li")
    assert items.count() == 1 + len(record["steps"])
    assert " ".join(items.nth(0).inner_text().split()) == f"顾客 · rule {record['dialogue']['opening']}"
    asks = page.locator("#turn-list li.ask")
    assert asks.count() == len(turns)
    for position, turn in enumerate(turns):
        text = asks.nth(position).inner_text().split("\n")
        assert text == [f"{turn['step_index']} · 问", turn["question"], "答", turn["reply"]], text
    for step in record["steps"]:
        if "dialogue" not in step:  # a shop step: its tool call and outcome
            line = page.inner_text(f"#turn-list li[data-step='{step['step_index'] - 1}']")
            assert line.startswith(f"{step['step_index']} · ") and step["action"] in line
    _shot(page, "replay-dialogue-1-turns")

    page.click(f"#turn-list li[data-step='{turns[0]['step_index'] - 1}']")  # jump to a question
    assert page.inner_text("#step-counter") == f"step {turns[0]['step_index']} / {len(record['steps'])}"
    assert page.is_visible("#step-dialogue")
    assert page.inner_text("#step-question") == turns[0]["question"]
    assert page.inner_text("#step-reply") == turns[0]["reply"]
    assert "ask_user" in page.inner_text("#step-tool-call")
    shop_step = next(s for s in record["steps"] if "dialogue" not in s)
    page.click(f"#turn-list li[data-step='{shop_step['step_index'] - 1}']")
    assert page.is_hidden("#step-dialogue")
    assert page.locator("#turn-list li.selected").get_attribute("data-step") == str(shop_step["step_index"] - 1)


def test_replay_view_shows_markup_in_a_trace_as_text(page: Any, base: str) -> None:
    page.goto(f"{base}/replay-ui")
    page.locator("#runs li[data-run='dialogue-run']").click()
    page.click("#episodes tr[data-episode='task-999999__sample-000']")
    page.wait_for_selector("#outcomeComparison:not([hidden])")
    assert page.locator("#episode-card img, #episode-card b, #bold").count() == 0
    assert INJECTED + "开场" in page.inner_text("#turn-list li.opening")
    first = page.locator("#turn-list li.ask").first.inner_text()
    assert INJECTED + "问" in first and INJECTED + "答" in first
    assert page.inner_text("#step-reasoning") == INJECTED
    _shot(page, "replay-dialogue-2-escaped")


def test_replay_view_of_a_run_without_a_shopper_has_no_dialogue_parts(page: Any, base: str) -> None:
    page.goto(f"{base}/replay-ui")
    page.locator("#runs li[data-run='plain-run']").click()
    page.wait_for_selector("#run-card:not([hidden])")
    assert "questions" not in page.inner_text("#episodes tr:first-child")
    assert "shopper" not in page.inner_text("#run-summary")
    page.locator("#episodes tr.selectable").first.click()
    page.wait_for_selector("#outcomeComparison:not([hidden])")
    assert page.locator("#turn-list li.opening, #turn-list li.ask").count() == 0
    assert page.locator("#turn-list li[data-step]").count() > 0 and page.is_hidden("#step-dialogue")
    assert "withheld" not in page.inner_text("#episode-instruction")

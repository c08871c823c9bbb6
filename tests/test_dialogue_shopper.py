"""The rule shopper (issue 16): golden conversations, determinism across processes, noise, settings errors.

Golden conversations run on the hand-written fixture catalog, so only a change of the shopper (or of the
generator vocabulary it borrows: nouns, paraphrases) changes them; regenerate with
``SHOPSIMRL_REGEN_GOLDEN=1 pytest tests/test_dialogue_shopper.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.dialogue import NoiseConfig, RuleShopper, ShopperConfig
from shopsimrl.dialogue.lexicon import match_question
from shopsimrl.dialogue.noise import approximate, episode_rng
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.dialogue.replies import ALL_SAID, NEUTRAL_REPLY
from shopsimrl.dialogue.slots import build_slots
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import RequestError, ShopSimError
from shopsimrl.versions import MAX_QUESTION_CHARS

GOLDEN = Path(__file__).parent / "golden" / "dialogue_conversations.json"
GOLDEN_TASKS = (0, 3, 7, 9, 12, 14)
SCRIPT = (
    "你好，请问你想买什么？",
    "今天天气怎么样？",
    "那我直接下单可以吗？",
    "你的预算是多少？",
    "对商品有什么具体要求吗？",
    "颜色有要求吗？",
    "尺码呢？",
    "还有别的要求吗？",
    "还有其他需要补充的吗？",
    "好的，那我买这个可以吗？",
)


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


def conversation(env: ShopEnv, task_id: int, config: ShopperConfig | None = None) -> dict:
    reset = env.reset(task_id, shopper="rule", shopper_config=config, include_private_goal=True)  # transcript mid-episode
    turns = []
    for question in SCRIPT:
        result = env.step(f"ask_user[{question}]")
        turns.append({"question": question, "reply": result["shopper_reply"]})
    transcript = env.dialogue_transcript()
    return {
        "task_id": task_id,
        "opening": reset["shopper_opening"],
        "turns": turns,
        "slots": [entry["slots"] for entry in transcript],
        "intents": [entry["intent"] for entry in transcript],
        "noise": [entry["noise"] for entry in transcript],
    }


def conversations(world: ShopWorld, config: ShopperConfig | None = None) -> list[dict]:
    env = ShopEnv(world, shoppers=shopper_registry())
    return [conversation(env, task_id, config) for task_id in GOLDEN_TASKS]


def test_golden_conversations(world: ShopWorld) -> None:
    got = conversations(world)
    text = json.dumps(got, ensure_ascii=False, indent=1) + "\n"
    if os.environ.get("SHOPSIMRL_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")


def test_golden_conversations_behave_as_specified(world: ShopWorld) -> None:
    """What the golden file must show whatever its wording: the anchor's rules, checked on every conversation."""
    for item in json.loads(GOLDEN.read_text("utf-8")):
        goal = world.catalog.goal(item["task_id"])
        replies = [turn["reply"] for turn in item["turns"]]
        assert replies[1] == NEUTRAL_REPLY  # off-topic
        assert replies[2].startswith("信息还不完整") and "预算" in replies[2]  # a proposal before anything is said
        assert item["intents"][3] == "slots" and item["slots"][3] == ["budget"]
        assert all(len(slots) <= 2 for slots in item["slots"])
        revealed = {name for slots in item["slots"] for name in slots}
        total = len(build_slots(goal, world.catalog.products_by_asin[goal["asin"]].raw))
        if len(revealed) + 1 == total:  # everything but the product (said in the opening) was asked
            assert item["intents"][-1] == "purchase_complete"
        assert ALL_SAID in replies or item["intents"][-1] == "purchase_incomplete"
        assert goal["asin"] not in json.dumps(item, ensure_ascii=False)


_SUBPROCESS = """
import json, sys
from shopsimrl.dialogue import NoiseConfig, ShopperConfig
from shopsimrl.env import ShopWorld
sys.path.insert(0, sys.argv[2])
from test_dialogue_shopper import conversations
noise = json.loads(sys.argv[3])
config = ShopperConfig(sample_seed=noise.pop("seed"), noise=NoiseConfig(**noise)) if noise else None
print(json.dumps(conversations(ShopWorld.from_data_dir(sys.argv[1]), config), ensure_ascii=False))
"""


def _in_subprocess(prepared_dir: Path, noise: dict, hash_seed: str) -> list[dict]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    done = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, str(prepared_dir), str(Path(__file__).parent), json.dumps(noise)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_noise_free_dialogue_is_identical_across_processes(prepared_dir: Path, world: ShopWorld) -> None:
    here = conversations(world)
    assert _in_subprocess(prepared_dir, {}, "1") == here
    assert _in_subprocess(prepared_dir, {}, "987") == here


def test_noisy_dialogue_is_reproducible_across_processes_and_depends_on_the_sample_seed(
    prepared_dir: Path, world: ShopWorld
) -> None:
    rates = {"omit": 0.4, "approximate_budget": 1.0, "paraphrase": 1.0}
    config = ShopperConfig(sample_seed=5, noise=NoiseConfig(**rates))
    here = conversations(world, config)
    assert _in_subprocess(prepared_dir, {"seed": 5, **rates}, "3") == here
    other = conversations(world, ShopperConfig(sample_seed=6, noise=NoiseConfig(**rates)))
    assert other != here
    assert here != conversations(world)
    events = {event.split(":")[0] for item in here for turn in item["noise"] for event in turn}
    assert {"omit", "approximate", "paraphrase"} <= events


def test_noise_never_touches_the_global_rng(world: ShopWorld) -> None:
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    conversations(world, ShopperConfig(sample_seed=1, noise=NoiseConfig(omit=0.5, paraphrase=0.5)))
    assert random.random() == expected


def test_episode_rng_is_keyed_by_task_seed_and_stream() -> None:
    assert episode_rng(1, 0, "noise").random() == episode_rng(1, 0, "noise").random()
    assert episode_rng(1, 0, "noise").random() != episode_rng(2, 0, "noise").random()
    assert episode_rng(1, 0, "noise").random() != episode_rng(1, 1, "noise").random()


def test_approximate_budget_rounds_to_two_significant_figures() -> None:
    assert approximate(715.0) == 720.0
    assert approximate(54.9) == 55.0
    assert approximate(1200.0) == 1200.0
    assert approximate(8.0) == 8.0


def test_each_noise_kind_acts_as_configured(world: ShopWorld) -> None:
    goal = world.catalog.goal(9)  # 防水 has paraphrases; a budget; a colour option
    product = world.catalog.products_by_asin[goal["asin"]].raw
    omit_all = RuleShopper(goal, product, ShopperConfig(noise=NoiseConfig(omit=1.0)))
    reply = omit_all.reply("你的预算是多少？")
    assert "60" not in reply.text and reply.noise_events == ("omit:budget",)
    assert omit_all.reply("可以下单吗？").intent == "purchase_incomplete"  # omitted still counts as asked
    blurred = RuleShopper(goal, product, ShopperConfig(noise=NoiseConfig(approximate_budget=1.0)))
    text = blurred.reply("预算多少？").text
    assert "大概66块钱吧" in text and "价格在60元以内" not in text  # the ceiling (60 × 1.1), blurred
    worded = RuleShopper(goal, product, ShopperConfig(noise=NoiseConfig(paraphrase=1.0)))
    text = worded.reply("需要防水吗？").text
    assert text in ("嗯，要不怕水的。", "嗯，要能防水的。")  # a paraphrase from the vocabulary, not the keyword


def test_lexicon_prefers_named_slots_and_refuses_foreign_axes(world: ShopWorld) -> None:
    goal = world.catalog.goal(5)  # earphones: one attribute, no option
    slots = build_slots(goal, world.catalog.products_by_asin[goal["asin"]].raw)
    assert match_question("颜色有要求吗？", slots).intent == "neutral"
    assert match_question("需要什么尺寸？", slots).intent == "neutral"
    assert match_question("需要防水功能吗？", slots).intent == "neutral"  # an attribute the goal does not ask for
    assert match_question("有什么功能需求？", slots).general == (1,)
    assert match_question("压力大吗？", slots).intent == "neutral"
    assert match_question("低夹耳压力的吗？", slots).slots == (1,)
    assert match_question("有什么要求？", slots).intent == "slots"
    assert match_question("可以下单吗", slots).intent == "purchase"
    assert match_question("还有吗", slots).intent == "open"
    assert match_question("ＢＵＤＧＥＴ?", slots).slots == (slots[-1].index,)  # NFKC + casefold


@pytest.mark.parametrize(
    "kwargs",
    [{"max_questions": -1}, {"max_questions": True}, {"max_questions": 10_000}, {"sample_seed": "1"}, {"noise": 0.5}],
)
def test_bad_shopper_settings_are_typed_errors(kwargs: dict) -> None:
    with raises_kind(RequestError, "dialogue_unavailable"):
        ShopperConfig(**kwargs)


@pytest.mark.parametrize("rates", [{"omit": 1.5}, {"paraphrase": -0.1}, {"approximate_budget": float("nan")}])
def test_bad_noise_rates_are_typed_errors(rates: dict) -> None:
    with raises_kind(RequestError, "dialogue_unavailable") as info:
        NoiseConfig(**rates)
    assert isinstance(info.value, ShopSimError)


@settings(max_examples=200, deadline=None)
@given(questions=st.lists(st.text(max_size=MAX_QUESTION_CHARS), min_size=1, max_size=12))
def test_any_question_gets_a_short_reply_about_at_most_two_slots(questions: list[str]) -> None:
    goal = {
        "task_id": 1, "category": "服装›女装›连衣裙", "instruction_text": "想要一条收腰的连衣裙，M码，价格在140元左右。",
        "attributes": ["收腰", "防水"], "goal_options": ["M"], "price_upper": 154.0,
    }  # fmt: skip
    product = {"customization_options": {"尺码": [{"value": "S"}, {"value": "M"}]}}
    shopper = RuleShopper(goal, product, ShopperConfig(noise=NoiseConfig(omit=0.3, paraphrase=0.5)))
    before = set(shopper.revealed)
    for question in questions:
        reply = shopper.reply(question)
        assert reply.text and len(reply.text) < 80
        assert len(reply.slots) <= 2
        assert reply.intent in {"slots", "open", "neutral", "purchase_complete", "purchase_incomplete"}
        assert before <= shopper.revealed
        before = set(shopper.revealed)
    assert len(shopper.transcript) == len(questions)


@pytest.mark.parametrize(
    ("seller", "instruction", "plain"),
    [
        ("黑色【现货速发】", "想买一个黑色的手机支架", "黑色"),
        ("【红色】经典款", "颜色要红色", "红色"),
        ("5斤【囤货装】", "要5斤的大米", "5斤"),
        ("2个装", "要两个装的", "2个装"),  # merged unit (2个装 + 装): the request's form wins
        ("双缸22格【送赠品】", "选双缸22格", "双缸22格"),
        ("M", "尺码要M", "M"),
    ],
)
def test_shopper_says_the_plain_option_value_not_the_seller_string(seller: str, instruction: str, plain: str) -> None:
    goal = {
        "instruction_text": instruction,
        "category": "",
        "goal_options": [seller],
        "attributes": [],
        "price_upper": None,
    }
    product = {"customization_options": {"颜色分类": [{"value": seller}, {"value": "白色"}]}}
    (option,) = [slot for slot in build_slots(goal, product) if slot.kind == "option"]
    assert option.value == seller  # the reward still checks the listed string
    assert option.phrase == plain
    assert "【" not in option.phrase and seller in option.surfaces and plain in option.surfaces


def test_option_phrases_on_a_generated_catalog_are_the_words_of_the_instruction() -> None:
    from shopsimrl.dialogue.slots import _SPOKEN
    from shopsimrl.generate.generator import build_catalog
    from shopsimrl.generate.layout import GeneratorConfig

    catalog = build_catalog(7, GeneratorConfig(products=600, two_axis_products=20, persona_tasks=150))
    checked = decorated = 0
    for record in catalog.records:
        for task in record["instructions"]:
            instruction = str(task["instruction"])
            goal = {"instruction_text": instruction, "goal_options": task["instruction_options"], "attributes": []}
            said = "".join(_SPOKEN.get(char, char) for char in instruction)
            for slot in build_slots(goal, record):
                if slot.kind == "option":
                    checked += 1
                    decorated += slot.phrase != slot.value
                    assert slot.phrase in instruction or slot.phrase in said, (slot, instruction)
    assert checked and decorated  # seller strings occur, and every one is said as the request says it

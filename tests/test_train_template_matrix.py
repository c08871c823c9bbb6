"""No silent zero-reward template (issue 25 item 4): every chat template TRL 1.16 bundles, in both modes,
either completes an oracle episode with a reward or fails loudly before the first episode.

"Silent" is what this guards against: an episode that completes with reward 0 because every turn was a protocol
error (the template renders no tool call, or one the project cannot read back). The tokenizer is a byte-level
BPE trained once on the fixture catalog; each case swaps in one template file as shipped.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the train extra (transformers, trl, tokenizers) is not installed")

import trl

from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.prompt import SYSTEM_PROMPT
from shopsimrl.env import ShopWorld
from shopsimrl.testing.scripted import TemplatePolicyGenerate
from shopsimrl.testing.tiny_hf import build_bpe_tokenizer
from shopsimrl.train.health import batch_health, turn_counts
from shopsimrl.train.rollout import ABORTED, RolloutConfig, RolloutContext, run_rollout
from shopsimrl.train.template_probe import TemplateUnreadableError, check_template

TEMPLATES = sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja"))


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_tokenizer(prepared_dir: Path) -> Any:
    products = json.loads(gzip.decompress((prepared_dir / "products.json.gz").read_bytes()))
    corpus = [SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)]
    return build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=TEMPLATES[0].read_text(encoding="utf-8"))


def test_the_matrix_covers_every_template_trl_bundles() -> None:
    assert len(TEMPLATES) >= 70 and any(p.stem == "deepseekv3" for p in TEMPLATES)


@pytest.mark.parametrize("mode", ["append", "resegment"])
@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_every_template_is_rewarded_or_refused_loudly(world: ShopWorld, base_tokenizer: Any, template: Path,
                                                     mode: str) -> None:
    tokenizer = copy.deepcopy(base_tokenizer)
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    try:
        check_template(tokenizer)
    except TemplateUnreadableError as exc:
        assert template.stem[:6] in str(exc) or "chat template" in str(exc)
        return  # loud: refused before the first episode, with what the template lacks
    generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world))
    try:
        trajectory = asyncio.run(run_rollout(RolloutContext(0), tokenizer, generate, InProcessEnvironment(world),
                                             config=RolloutConfig(mode=mode, max_steps=12)))
    except Exception:
        return  # loud: the adapter's call raises
    if trajectory.status == ABORTED:
        assert trajectory.error and trajectory.error["message"]  # loud: aborted, with the error in metadata
        return
    assert trajectory.reward > 0, (template.stem, trajectory.steps[:2])  # never a silent zero


def test_a_batch_of_protocol_errors_raises_the_warning_metric(caplog: pytest.LogCaptureFixture) -> None:
    steps = [{"sampled_tokens": 5, "protocol_error": {"code": "no_tool_call"}}] * 3
    assert batch_health([turn_counts(steps)] * 2, "test")["shop/protocol_error_alarm"] == 1.0
    assert "every model turn" in caplog.text
    mixed = [*steps, {"sampled_tokens": 5}]
    assert batch_health([turn_counts(mixed)], "test") == {"shop/protocol_error_rate": 0.75,
                                                           "shop/protocol_error_alarm": 0.0}
    assert batch_health([], "test")["shop/protocol_error_alarm"] == 0.0

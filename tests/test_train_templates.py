"""The rollout core against real chat templates: every family TRL bundles that the project supports, both modes.

Templates are TRL's bundled files (``trl/chat_templates``: the model repos' originals and TRL's training
variants); the tokenizer is a byte-level BPE trained here on the fixture catalog with a Qwen-style
pre-tokenizer (no download). Generation is scripted (:class:`TemplatePolicyGenerate`): the oracle's action,
sampled as the template renders it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections import Counter
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
from shopsimrl.train.bpe_tokenizer import build_bpe_tokenizer
from shopsimrl.train.chat_template import episode_tools, render_text
from shopsimrl.train.rollout import ABORTED, COMPLETED, RolloutConfig, RolloutContext, run_rollout

TEMPLATES = Path(trl.__file__).parent / "chat_templates"
# family → (template file, eos token)
FAMILIES = {
    "qwen2_5": ("qwen2_5.jinja", "<|im_end|>"),
    "qwen3": ("qwen3.jinja", "<|im_end|>"),  # the original: swapped for the training variant ("auto")
    "qwen3_training": ("qwen3_training.jinja", "<|im_end|>"),
    "qwen3_5_think": ("qwen3_5_think.jinja", "<|im_end|>"),  # dict arguments, XML parameters
    "llama3_1": ("llama3_1.jinja", "<|eot_id|>"),
    "gptoss": ("gptoss.jinja", "<|return|>"),
    "glm4moe": ("glm4moe.jinja", "<|user|>"),
}
MODES = ("resegment", "append")
# Documented exception (docs/training.md): gpt-oss ends a sampled final-channel message with <|return|> but
# renders it with <|end|> in history. Only the repair turn (visible text) is such a message here: re-segment
# mode forks once after it, append mode keeps the sampled <|return|>.
RETURN_TO_END = {"gptoss": ("<|return|>", "<|end|>")}


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def corpus(prepared_dir: Path) -> list[str]:
    products = json.loads(gzip.decompress((prepared_dir / "products.json.gz").read_bytes()))
    return [SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)]


def _tokenizer(corpus: list[str], family: str) -> Any:
    file, eos = FAMILIES[family]
    return build_bpe_tokenizer(corpus, vocab_size=2000, eos_token=eos,
                               chat_template=(TEMPLATES / file).read_text(encoding="utf-8"))


def _run(world: ShopWorld, tokenizer: Any, generate: Any, mode: str, task_id: int = 0,
         **config: Any) -> Any:
    cfg = RolloutConfig(mode=mode, max_steps=12, **config)
    return asyncio.run(run_rollout(RolloutContext(task_id), tokenizer, generate, InProcessEnvironment(world),
                                   config=cfg))


def _repair_once(index: int) -> str | None:
    return "我先想一想。" if index == 1 else None  # the second turn is visible text: a protocol error


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_multi_turn_episodes_complete_for_every_template(world: ShopWorld, corpus: list[str], family: str,
                                                         mode: str) -> None:
    tokenizer = _tokenizer(corpus, family)
    generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world), text_turns=_repair_once)
    traj = _run(world, tokenizer, generate, mode)
    assert traj.status == COMPLETED, traj.error
    assert traj.reward == 1.0 and len(traj.steps) >= 4
    assert any("protocol_error" in s for s in traj.steps)  # the repair turn went through the template too
    assert Counter(traj.trained_tokens) == Counter(traj.generated_tokens)
    # prefix-preserving (after the policy) and tools rendered once per episode: one segment
    assert len(traj.segments) == (2 if family in RETURN_TO_END and mode == "resegment" else 1)
    # tool-call arguments stay objects in the history (what Qwen3.5/GLM/Llama templates iterate over)
    calls = [c for m in traj.messages for c in m.get("tool_calls") or []]
    assert calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
    seq = tokenizer.decode(traj.segments[-1].tokens, skip_special_tokens=False)
    if family in RETURN_TO_END:
        seq = seq.replace(*RETURN_TO_END[family])
    canonical = render_text(tokenizer, traj.messages, episode_tools(), add_generation_prompt=False)
    if mode == "append":
        # the exact sampled sequence is the template's own render of the whole conversation (boundaries included)
        assert canonical.startswith(seq), (seq[-300:], canonical[len(seq) - 300: len(seq) + 50])
    else:
        assert canonical.startswith(seq[: len(seq) - len(tokenizer.decode(traj.segments[-1].tokens[-1:]))])
    if family == "qwen3":
        assert "training template" in traj.metadata["chat_template"]


def test_append_mode_keeps_the_newline_after_im_end(world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = _tokenizer(corpus, "qwen2_5")
    traj = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, make_policy("oracle", world)), "append")
    seq = tokenizer.decode(traj.segments[0].tokens, skip_special_tokens=False)
    assert "<|im_end|><|im_start|>" not in seq and seq.count("<|im_end|>\n<|im_start|>user") >= 3


def test_glm_stop_token_opens_the_next_message_once(world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = _tokenizer(corpus, "glm4moe")
    traj = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, make_policy("oracle", world)), "append")
    seq = tokenizer.decode(traj.segments[0].tokens, skip_special_tokens=False)
    assert "<|observation|><|observation|>" not in seq and seq.count("<|observation|>") >= 3


def test_original_qwen3_without_the_policy_fails_loudly_in_append_and_forks_in_resegment(
        world: ShopWorld, corpus: list[str]) -> None:
    tokenizer = _tokenizer(corpus, "qwen3")
    policy = make_policy("oracle", world)
    traj = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, policy), "append", training_template="off")
    assert traj.status == ABORTED and traj.error["type"] == "RolloutError" and traj.reward == 0.0
    tokenizer = _tokenizer(corpus, "qwen3")
    traj = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, policy), "resegment", training_template="off")
    assert traj.status == COMPLETED and traj.reward == 1.0
    assert len(traj.segments) > 1  # the rendered prefix really changed: a new segment, never misaligned
    assert Counter(traj.trained_tokens) == Counter(traj.generated_tokens)


@pytest.mark.parametrize("family", ["qwen2_5", "qwen3_5_think", "llama3_1"])
def test_retokenization_drift_forks_in_resegment_and_never_in_append(world: ShopWorld, corpus: list[str],
                                                                      family: str) -> None:
    tokenizer = _tokenizer(corpus, family)
    policy = make_policy("oracle", world)
    probe = TemplatePolicyGenerate(tokenizer, policy, noncanonical=True)
    text = probe.turn_text({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "search", "arguments": {"query": "冰箱 小吃车"}}}]})
    assert probe.token_ids(text) != tokenizer.encode(text, add_special_tokens=False)  # merges really happen
    drift = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, policy, noncanonical=True), "resegment")
    assert drift.status == COMPLETED and drift.reward == 1.0
    assert len(drift.segments) == len(drift.steps)  # each re-encoded prompt differs from what was sampled
    assert Counter(drift.trained_tokens) == Counter(drift.generated_tokens)
    kept = _run(world, tokenizer, TemplatePolicyGenerate(tokenizer, policy, noncanonical=True), "append")
    assert kept.status == COMPLETED and len(kept.segments) == 1
    assert kept.trained_tokens == kept.generated_tokens  # the exact sampled tokens, in order


def test_the_shipped_training_templates_are_trls_files_and_named(corpus: list[str]) -> None:
    """The copies the project ships (for environments without TRL) are byte-identical to TRL 1.16's files, and
    each replaces exactly the original template its manifest names."""
    import hashlib

    from shopsimrl.train.chat_template import shipped_training_template

    folder = Path(__file__).resolve().parents[1] / "src" / "shopsimrl" / "train" / "training_templates"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert set(manifest) == {p.name for p in folder.glob("*.jinja")} and "qwen3_training.jinja" in manifest
    for name, entry in manifest.items():
        shipped = (folder / name).read_bytes()
        assert shipped == (TEMPLATES / name).read_bytes() and hashlib.sha256(shipped).hexdigest() == entry["sha256"]
        original = (TEMPLATES / name.replace("_training", "")).read_text(encoding="utf-8")
        assert hashlib.sha256(original.encode()).hexdigest() == entry["replaces_sha256"]
        assert shipped_training_template(original) == shipped.decode("utf-8") and "TRL 1.16.0" in entry["source"]
    assert shipped_training_template("{{ messages }}") is None


@pytest.mark.parametrize("mode", MODES)
def test_without_trl_qwen3s_original_is_swapped_for_the_shipped_training_template(
        world: ShopWorld, corpus: list[str], mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's environment has no TRL: the swap still happens (the shipped copy), so append mode completes."""
    import sys

    monkeypatch.setitem(sys.modules, "trl.chat_template_utils", None)
    tokenizer = _tokenizer(corpus, "qwen3")
    generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world))
    traj = _run(world, tokenizer, generate, mode)
    assert traj.status == COMPLETED and traj.reward == 1.0, traj.error
    assert "shipped training template" in traj.metadata["chat_template"] and len(traj.segments) == 1


@pytest.mark.parametrize("family", list(FAMILIES))
def test_incremental_resegment_equals_the_full_render(world: ShopWorld, corpus: list[str], family: str) -> None:
    """Re-segment mode renders and tokenizes only the new messages each turn (prefix-preserving templates);
    the segments are token for token those of re-rendering the whole conversation."""
    results = {}
    for incremental in (True, False):
        tokenizer = _tokenizer(corpus, family)
        generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world), text_turns=_repair_once)
        results[incremental] = _run(world, tokenizer, generate, "resegment", incremental=incremental)
    fast, full = results[True], results[False]
    assert fast.status == full.status == COMPLETED
    assert [s.tokens for s in fast.segments] == [s.tokens for s in full.segments]
    assert [s.loss_mask for s in fast.segments] == [s.loss_mask for s in full.segments]


def _back_and_forth(generate: TemplatePolicyGenerate) -> Any:
    """Turn texts that search on the home page and go back from the results, so an episode runs all 30 turns."""
    def text(index: int) -> str:
        call = ({"name": "search", "arguments": {"query": "可移动小吃车"}} if index % 2 == 0
                else {"name": "click", "arguments": {"value": "back to search"}})
        return generate.turn_text({"role": "assistant", "content": None,
                                   "tool_calls": [{"id": "c", "type": "function", "function": call}]})
    return text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_thirty_turn_episodes_fit_the_context_budget(world: ShopWorld, corpus: list[str], family: str,
                                                     mode: str) -> None:
    """The context policy: every prompt sent to the model leaves the reserve of the budget free; an episode that
    would pass it ends with generation_length and is scored (never dropped), and its metadata says so."""
    tokenizer = _tokenizer(corpus, family)
    generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world))
    generate.text_turns = _back_and_forth(generate)
    sent: list[int] = []

    def recording(ids: list[int]) -> Any:
        sent.append(len(ids))
        return generate(ids)

    budget = 6000
    cfg = RolloutConfig(mode=mode, max_context_len=budget)
    traj = asyncio.run(run_rollout(RolloutContext(0), tokenizer, recording, InProcessEnvironment(world), config=cfg))
    assert traj.status in (COMPLETED, "truncated") and traj.error is None, traj.error
    assert sent and all(n + cfg.context_reserve <= budget for n in sent)
    assert traj.metadata["context_policy"] == "end_scored_generation_length"
    assert traj.metadata["context_budget"] == budget
    if traj.metadata["context_ended"]:
        assert traj.status == "truncated" and traj.metadata["termination_reason"] == "generation_length"
        assert "context_overflow" in traj.steps[-1] and traj.steps[-1]["context_overflow"] + 256 > budget
    else:
        assert len(traj.steps) == 30
    full = asyncio.run(run_rollout(RolloutContext(0), tokenizer, recording, InProcessEnvironment(world),
                                   config=RolloutConfig(mode=mode)))  # the default budget: 24,576
    assert full.metadata["context_budget"] == 24576 and full.status in (COMPLETED, "truncated")
    assert all(n + 256 <= 24576 for n in sent)

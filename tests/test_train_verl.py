"""The verl agent loop driven through verl's own code (verl 0.9.1 from the package registry, on CPU).

verl pins transformers<5.11, so it lives in its own environment (``make test`` builds ``.venv-verl`` and runs
this file there); in an environment without verl this module is skipped.

Each test builds a real ``AgentLoopWorker`` from verl's own Hydra config (``ppo_trainer.yaml``) with a tiny
local Llama config and character-level tokenizer, registers the adapter through an agent-loop YAML file, and
calls ``generate_sequences``: verl instantiates ``ShopAgentLoop`` (Hydra), awaits ``run``, pads it in
``_agent_loop_postprocess`` and stacks the batch in ``_postprocess``. Only the inference server is scripted:
:class:`ScriptedServer` speaks the ``LLMServerClient.generate`` signature and answers with verl's own
``TokenOutput``, replaying the oracle's tool calls for the task it finds in the prompt.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

verl = pytest.importorskip("verl", reason="verl runs in its own environment (.venv-verl, see the Makefile)")
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402

import verl_support as support  # noqa: E402
from shopsimrl.train import verl as adapter  # noqa: E402
from verl_support import LOG_PROB, TASKS, make_worker  # noqa: E402


@pytest.fixture(scope="module")
def scripts(prepared_dir: Path) -> dict[int, dict[str, Any]]:
    return support.oracle_scripts(prepared_dir)


@pytest.fixture(scope="module")
def model_dir(prepared_dir: Path, scripts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return support.tiny_model_dir(prepared_dir, scripts, tmp_path_factory.mktemp("verl-model"))


def rows(*extra_infos: dict[str, Any]) -> DataProto:
    n = len(extra_infos)
    return DataProto(batch=None, non_tensor_batch={
        "agent_name": np.array(["shopsim"] * n, dtype=object),
        "raw_prompt": np.array([[{"role": "user", "content": "shop"}]] * n, dtype=object),
        "extra_info": np.array(list(extra_infos), dtype=object),
        "index": np.arange(n),
    }, meta_info={"global_steps": 1, "validate": False})


def run(worker: AgentLoopWorker, batch: DataProto) -> DataProto:
    return asyncio.run(worker.generate_sequences(batch))


def sequence(out: DataProto, i: int) -> list[int]:
    """Row i's real tokens: prompt and response without padding (what the trainer sees)."""
    mask = out.batch["attention_mask"][i].bool()
    return out.batch["input_ids"][i][mask].tolist()


def test_short_prompts_run_through_verls_own_postprocess(model_dir, prepared_dir, tmp_path, scripts) -> None:
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=8192, response_length=4096)
    out = run(worker, rows(*({"task_id": t} for t in TASKS)))
    server, tok = worker.llm_client, worker.tokenizer
    assert out.batch["prompts"].shape == (4, 8192) and out.batch["responses"].shape == (4, 4096)
    assert out.batch["input_ids"].shape == (4, 8192 + 4096)
    for i, task in enumerate(TASKS):
        assert out.non_tensor_batch["shopsim_status"][i] == "completed"
        assert out.batch["rm_scores"][i].sum().item() == pytest.approx(scripts[task]["reward"])
        mask = out.batch["response_mask"][i].bool()
        sampled = out.batch["responses"][i][mask].tolist()
        texts = scripts[task]["texts"]
        assert sampled == [t for text in texts for t in [*tok.encode(text, add_special_tokens=False),
                                                        tok.eos_token_id]]
        assert torch.all(out.batch["rollout_log_probs"][i][mask] == LOG_PROB)
        assert torch.all(out.batch["rollout_log_probs"][i][~mask] == 0.0)
        # the trained sequence is the conversation itself: every later prompt extends it (append mode)
        calls = [c for c in server.calls if c["task"] == task]
        assert len(calls) == len(texts) and len({c["request_id"] for c in calls}) == 1
        assert len(sequence(out, i)) == calls[-1]["prompt_len"] + len(tok.encode(texts[-1])) + 1
        assert out.non_tensor_batch["shopsim_prompt_overflow"][i] == 0
    # the per-turn cap goes to the server as max_tokens, capped by what is left of the response budget
    for call in server.calls:
        first = min(c["prompt_len"] for c in server.calls if c["request_id"] == call["request_id"])
        assert call["sampling_params"]["max_tokens"] == min(4096, first + 4096 - call["prompt_len"])
        assert call["sampling_params"]["logprobs"] is True
    assert out.meta_info["reward_extra_keys"]
    assert list(out.non_tensor_batch["shopsim_aborted"]) == [0.0] * 4


def test_prompt_longer_than_prompt_length_is_capped_not_a_crash(model_dir, prepared_dir, tmp_path,
                                                                 scripts) -> None:
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=256, response_length=8192)
    out = run(worker, rows({"task_id": 0}, {"task_id": 1}))
    assert out.batch["prompts"].shape == (2, 256)
    tok = worker.tokenizer
    for i, task in enumerate((0, 1)):
        first = min(c["prompt_len"] for c in worker.llm_client.calls if c["task"] == task)
        assert first > 256
        assert out.non_tensor_batch["shopsim_status"][i] == "completed"
        assert out.non_tensor_batch["shopsim_prompt_overflow"][i] == first - 256
        assert out.batch["rm_scores"][i].sum().item() == pytest.approx(scripts[task]["reward"])
        # nothing of the prompt is lost: the overflow leads the response, masked
        assert torch.all(out.batch["response_mask"][i][: first - 256] == 0)
        full = sequence(out, i)
        assert tok.decode(full[:first]).startswith("<|im_start|>system")
        sampled = out.batch["responses"][i][out.batch["response_mask"][i].bool()].tolist()
        assert tok.decode(sampled).count("<tool_call>") == len(scripts[task]["texts"])
    # a first prompt that cannot fit even with the response budget: a masked, zero-reward row
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=64, response_length=64)
    out = run(worker, rows({"task_id": 0}, {"task_id": 1}))
    assert out.batch["prompts"].shape == (2, 64) and out.batch["responses"].shape == (2, 64)
    assert list(out.non_tensor_batch["shopsim_status"]) == ["aborted", "aborted"]
    assert out.batch["response_mask"].sum().item() == 0 and out.batch["rm_scores"].abs().sum().item() == 0
    assert worker.llm_client.calls == []  # nothing was generated for a prompt that cannot fit


def test_aborted_and_failed_episodes_never_fail_the_batch(model_dir, prepared_dir, tmp_path, scripts) -> None:
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=8192, response_length=4096)
    worker.llm_client.mode[1] = "abort"
    out = run(worker, rows({"task_id": 0}, {"task_id": 1}, {"task_id": 10_000}, {"no": "task"}))
    status = list(out.non_tensor_batch["shopsim_status"])
    assert status == ["completed", "aborted", "aborted", adapter.STATUS_INVALID_ROW]
    errors = list(out.non_tensor_batch["shopsim_error"])
    assert errors[0] is None and "aborted" in errors[1] and "task_id" in errors[3]
    assert errors[2] and errors[2].startswith("reset")
    assert out.batch["rm_scores"][0].sum().item() == pytest.approx(scripts[0]["reward"])
    for i in (1, 2, 3):
        assert out.batch["response_mask"][i].sum().item() == 0
        assert out.batch["rm_scores"][i].abs().sum().item() == 0
        assert out.non_tensor_batch["shopsim_aborted"][i] == 1.0
    assert out.batch["rollout_log_probs"].shape == (4, 4096)


def test_length_cutoff_from_token_count_against_the_per_turn_cap(model_dir, prepared_dir, tmp_path,
                                                                 scripts) -> None:
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=8192, response_length=4096,
                         per_turn=24)
    worker.llm_client.mode[0] = "ramble"
    out = run(worker, rows({"task_id": 0}, {"task_id": 1}))
    calls = worker.llm_client.calls
    assert {c["sampling_params"]["max_tokens"] for c in calls} == {24}
    # verl's server says "completed"; 24 tokens without an end-of-turn token is a cut-off
    assert out.non_tensor_batch["shopsim_status"][0] == "truncated"
    assert out.non_tensor_batch["shopsim_termination_reason"][0] == "generation_length"
    assert out.non_tensor_batch["shopsim_length_cuts"][0] == 1
    assert out.batch["response_mask"][0].sum().item() == 24
    assert len([c for c in calls if c["task"] == 0]) == 1
    # the oracle's calls are shorter than 24 tokens? then task 1 is cut too; otherwise it completes
    longest = max(len(worker.tokenizer.encode(t)) + 1 for t in scripts[1]["texts"])
    assert out.non_tensor_batch["shopsim_status"][1] == ("completed" if longest < 24 else "truncated")


def test_no_log_probs_when_verl_does_not_compute_them(model_dir, prepared_dir, tmp_path, scripts) -> None:
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=8192, response_length=4096,
                         log_probs=False)
    out = run(worker, rows({"task_id": 0}, {"task_id": 99_999}))
    assert "rollout_log_probs" not in set(out.batch.keys())
    assert all(c["sampling_params"]["logprobs"] is False for c in worker.llm_client.calls)
    assert list(out.non_tensor_batch["shopsim_status"]) == ["completed", "aborted"]


@pytest.mark.parametrize("blocked, expected", [
    ("cachetools", "needs the module `cachetools`, which is missing: `pip install cachetools`"),
    ("verl", "verl is not installed: `pip install 'shopsimrl[verl]'`"),
])
def test_missing_module_gets_a_precise_install_hint(blocked: str, expected: str) -> None:
    code = ("import sys\n"
            f"sys.modules[{blocked!r}] = None\n"
            "from shopsimrl.train import verl as v\n"
            "try:\n    v.ShopAgentLoop\nexcept v.AdapterError as e:\n    print(e)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert expected in done.stdout, done.stdout + done.stderr


def test_the_response_budget_caps_max_tokens_and_the_response(model_dir, prepared_dir, tmp_path, scripts) -> None:
    """A response budget smaller than one oracle call: the first turn is asked for exactly the budget, comes
    back cut off, and the row fits ``response_length`` without being cut afterwards."""
    budget = min(len(worker_text) for worker_text in scripts[0]["texts"]) // 2
    worker = make_worker(model_dir, prepared_dir, tmp_path, scripts, prompt_length=8192, response_length=budget)
    out = run(worker, rows({"task_id": 0}))
    (call,) = worker.llm_client.calls
    assert call["sampling_params"]["max_tokens"] == budget
    assert out.non_tensor_batch["shopsim_status"][0] == "truncated"
    assert out.non_tensor_batch["shopsim_response_cut"][0] == 0
    assert out.batch["response_mask"][0].sum().item() == budget


def test_dialogue_rows_play_the_shopper_and_mask_its_replies(model_dir, prepared_dir, tmp_path) -> None:
    """Dialogue mode (issue 16): ``extra_info.shopper`` rows run through verl's own worker and postprocess; the
    first user message is the shopper's opening, its replies are response tokens with mask 0, and the reward is
    the runtime's for the same dialogue."""
    from dialogue_support import check_split, opening, questions, reference, replies
    from shopsimrl.env import ShopWorld

    dialogue = support.dialogue_scripts(prepared_dir)
    assert len({s["user"] for s in dialogue.values()}) == len(TASKS)  # the server tells the tasks apart
    worker = make_worker(model_dir, prepared_dir, tmp_path, dialogue, prompt_length=8192, response_length=8192)
    out = run(worker, rows(*({"task_id": t, "shopper": "rule"} for t in TASKS), {"task_id": 0, "shopper": "x"}))
    tok, world = worker.tokenizer, ShopWorld.from_data_dir(prepared_dir)
    status = list(out.non_tensor_batch["shopsim_status"])
    assert status == ["completed"] * len(TASKS) + [adapter.STATUS_INVALID_ROW]
    assert "unknown shopper" in out.non_tensor_batch["shopsim_error"][len(TASKS)]
    for i, task in enumerate(TASKS):
        expected = reference(world, task, "dialogue-heuristic")
        assert out.batch["rm_scores"][i].sum().item() == pytest.approx(expected["final"]["reward"])
        start, _, instruction = opening(world, task)
        prompt = tok.decode(out.batch["prompts"][i][out.batch["attention_mask"][i][:8192].bool()].tolist())
        assert start in prompt and instruction not in prompt
        response, mask = out.batch["responses"][i], out.batch["response_mask"][i].bool()
        real = out.batch["attention_mask"][i][8192:].bool()
        trained = tok.decode(response[mask].tolist(), skip_special_tokens=False)
        untrained = tok.decode(response[real & ~mask].tolist(), skip_special_tokens=False)
        check_split(trained, untrained, questions([s["action"] for s in expected["steps"]]),
                    replies(expected["conversation"]))
        assert torch.all(out.batch["rollout_log_probs"][i][~mask] == 0.0)


def _advantage_batch(rewards: list[float], scored: list[bool], uids: list[str], width: int = 6) -> DataProto:
    """Rows as the agent loop returns them: a scored row has sampled tokens, an aborted one a single masked
    token and reward 0; the reward sits on the last real response token (verl's rm_scores layout)."""
    n = len(rewards)
    mask = torch.zeros(n, width, dtype=torch.int64)
    scores = torch.zeros(n, width)
    for i, (reward, ok) in enumerate(zip(rewards, scored, strict=True)):
        length = width if ok else 1
        mask[i, :length] = 1 if ok else 0
        scores[i, length - 1] = reward
    return DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask},
                               non_tensors={"uid": np.array(uids, dtype=object)})


def test_aborted_siblings_drop_their_group_through_verls_compute_advantage() -> None:
    """verl's own ``compute_advantage`` (ray_trainer) with the registered ``shopsim_grpo``: 2 aborted of 4 drop
    the group (every advantage 0), a fully scored group gets verl's GRPO numbers; verl's stock ``grpo`` would
    give the completed siblings +0.866 from the aborts alone."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from shopsimrl.train import verl_grpo

    verl_grpo.register()
    verl_grpo.register()  # idempotent: the Ray hook may run more than once per process
    rewards = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    scored = [True, True, False, False, True, True, True, True]
    uids = ["a"] * 4 + ["b"] * 4
    config = OmegaConf.create({"norm_adv_by_std_in_grpo": True})
    stock = compute_advantage(_advantage_batch(rewards, scored, uids), adv_estimator="grpo", config=config)
    assert stock.batch["advantages"][0, 0].item() == pytest.approx(0.866, abs=1e-3)  # the bug this fixes
    ours = compute_advantage(_advantage_batch(rewards, scored, uids), adv_estimator=verl_grpo.ESTIMATOR,
                             config=config)
    adv = ours.batch["advantages"]
    assert adv[:4].abs().sum().item() == 0  # group a dropped: nothing of it moves the policy
    assert torch.allclose(adv[4:], stock.batch["advantages"][4:], atol=1e-6)  # group b: verl's GRPO numbers
    centred = compute_advantage(_advantage_batch(rewards, scored, uids), adv_estimator=verl_grpo.ESTIMATOR,
                                config=OmegaConf.create({"norm_adv_by_std_in_grpo": False}))
    assert centred.batch["advantages"][4, 0].item() == pytest.approx(0.5)


def test_the_estimator_registers_in_a_fresh_process_through_the_ray_hook_path() -> None:
    """The recipe's ``worker_process_setup_hook`` names an importable function that fills verl's registry."""
    code = ("import importlib; from verl.trainer.ppo import core_algos; "
            "mod, _, fn = 'shopsimrl.train.verl_grpo.register'.rpartition('.'); "
            "getattr(importlib.import_module(mod), fn)(); "
            "print(core_algos.get_adv_estimator_fn('shopsim_grpo').__name__)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "shopsim_grpo_advantage"


def test_the_shipped_gptoss_training_template_renders_under_verls_transformers() -> None:
    """transformers 5.10 (verl's pin) hands a tool-call turn's ``content: None`` to the template, where gpt-oss's
    ``"…" in message.content`` raised a TypeError; the project's render leaves None-valued keys out (as
    transformers >= 5.11 does itself), so the shipped training template renders the probe conversation."""
    from importlib import resources

    from shopsimrl.testing.tiny_hf import build_tokenizer
    from shopsimrl.train.chat_template import PROBE_CONVERSATION, render_text

    template = resources.files("shopsimrl.train").joinpath("training_templates/gptoss_training.jinja").read_text(
        encoding="utf-8")
    tokenizer = build_tokenizer(["search probe"])
    tokenizer.chat_template = template
    tools = [{"type": "function", "function": {"name": "search", "description": "d", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
    assert any(m.get("content", 1) is None for m in PROBE_CONVERSATION)
    text = render_text(tokenizer, PROBE_CONVERSATION, tools, add_generation_prompt=False)
    assert "<|start|>assistant to=functions.search<|channel|>commentary json<|message|>" in text
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version("5.11"):  # what the guard is for: the raw call fails on this version
        with pytest.raises(TypeError, match="NoneType"):
            tokenizer.apply_chat_template(list(PROBE_CONVERSATION), tools=tools, tokenize=False)

"""Shared pieces for the tests that drive verl's own code: a tiny local model dir, the oracle scripts, and a
scripted inference server that speaks verl 0.9.1's ``LLMServerClient.generate`` signature."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import verl
from hydra import compose, initialize_config_dir
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.workers.rollout.replica import TokenOutput

from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.prompt import SYSTEM_PROMPT
from shopsimrl.env import ShopWorld
from shopsimrl.train.chat_template import EPISODE_VALUE_DESCRIPTION
from shopsimrl.train.rollout import RolloutConfig, RolloutContext, run_rollout
from toy import PolicyGenerate, ToyChatTokenizer

CONFIG_DIR = str(Path(verl.__file__).parent / "trainer" / "config")


TASKS = (0, 1, 2, 3)
LOG_PROB = -0.5


_CACHE: dict[Any, Any] = {}


def oracle_scripts(prepared_dir: Path) -> dict[int, dict[str, Any]]:
    """Per task: the oracle's sampled texts turn by turn, its first user message and its reward (cached)."""
    key = ("scripts", str(prepared_dir))
    if key not in _CACHE:
        _CACHE[key] = _oracle_scripts(prepared_dir)
    return _CACHE[key]


def _oracle_scripts(prepared_dir: Path, policy: str = "oracle", shopper: str | None = None
                    ) -> dict[int, dict[str, Any]]:
    world = ShopWorld.from_data_dir(prepared_dir)
    out = {}
    for task in TASKS:
        tokenizer = ToyChatTokenizer(tools_in_prompt=False)
        generate = PolicyGenerate(tokenizer, make_policy(policy, world))
        trajectory = asyncio.run(run_rollout(RolloutContext.for_task(task, shopper), tokenizer, generate,
                                             InProcessEnvironment(world), config=RolloutConfig(mode="append")))
        assert trajectory.scored, trajectory.error
        out[task] = {"texts": [s["raw_output"] for s in trajectory.steps], "user": trajectory.messages[1]["content"],
                     "reward": trajectory.reward, "messages": trajectory.messages}
    return out


def dialogue_scripts(prepared_dir: Path) -> dict[int, dict[str, Any]]:
    """The same per task for dialogue episodes (issue 16): the dialogue heuristic against the rule shopper."""
    key = ("dialogue", str(prepared_dir))
    if key not in _CACHE:
        _CACHE[key] = _oracle_scripts(prepared_dir, policy="dialogue-heuristic", shopper="rule")
    return _CACHE[key]


def tiny_model_dir(prepared_dir: Path, scripts: dict[int, dict[str, Any]], out: Path) -> Path:
    """A local 'model' for verl's HFModelConfig: a character tokenizer over every text used, a tiny config
    (built once per process)."""
    key = ("model", str(prepared_dir))
    if key not in _CACHE:
        _CACHE[key] = _tiny_model_dir(prepared_dir, scripts, out)
    return _CACHE[key]


def _tiny_model_dir(prepared_dir: Path, scripts: dict[int, dict[str, Any]], out: Path) -> Path:
    from transformers import LlamaConfig

    from shopsimrl.env import tools
    from shopsimrl.testing.tiny_hf import build_tokenizer

    texts = [SYSTEM_PROMPT, gzip.decompress((prepared_dir / "products.json.gz").read_bytes()).decode("utf-8"),
             tools.SEARCH_DESCRIPTION, tools.QUERY_DESCRIPTION, tools.CLICK_DESCRIPTION, tools.VALUE_DESCRIPTION,
             tools.ASK_USER_DESCRIPTION, tools.QUESTION_DESCRIPTION, EPISODE_VALUE_DESCRIPTION]
    for script in [*scripts.values(), *dialogue_scripts(prepared_dir).values()]:
        texts += [str(m.get("content") or "") for m in script["messages"]] + script["texts"]
    tokenizer = build_tokenizer(texts)
    tokenizer.save_pretrained(out)
    LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=2, architectures=["LlamaForCausalLM"]).save_pretrained(out)
    return out


class ScriptedServer:
    """Stands in for verl's ``LLMServerClient``: same ``generate`` signature, verl's ``TokenOutput`` back.

    It decodes the prompt, finds the task by its first user message and the turn by the number of tool
    results, and answers the oracle's text for that turn. ``mode`` per task: ``ok``, ``abort`` (the engine
    aborts), ``babble`` (answers without a tool call), ``ramble`` (never stops: exactly ``max_tokens`` tokens without an end-of-turn token).
    """

    def __init__(self, tokenizer: Any, scripts: dict[int, dict[str, Any]]) -> None:
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.mode: dict[int, str] = {}
        self.sibling_mode: dict[int, str] = {}  # only the first episode (request id) of the task plays this mode
        self._first: dict[int, str] = {}
        self.calls: list[dict[str, Any]] = []

    def _task(self, text: str) -> int:
        found = [t for t, s in self.scripts.items() if s["user"] in text]
        assert len(found) == 1, "the prompt must contain exactly one task's first user message"
        return found[0]

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, video_data: list[Any] | None = None,
                       audio_data: list[Any] | None = None, mm_processor_kwargs: dict[str, Any] | None = None,
                       **kwargs: Any) -> TokenOutput:
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        task = self._task(text)
        turn = text.count("<tool_response>")
        self.calls.append({"request_id": request_id, "task": task, "turn": turn, "prompt_len": len(prompt_ids),
                           "sampling_params": dict(sampling_params)})
        mode = self.mode.get(task, "ok")
        if task in self.sibling_mode and self._first.setdefault(task, request_id) == request_id:
            mode = self.sibling_mode[task]
        max_tokens = int(sampling_params["max_tokens"])
        if mode == "abort":
            return TokenOutput(token_ids=[], log_probs=[], stop_reason="aborted")
        if mode == "babble":  # an answer without a tool call: a protocol error every turn
            ids = [*self.tokenizer.encode("ok", add_special_tokens=False), self.tokenizer.eos_token_id]
        elif mode == "ramble":
            ids = self.tokenizer.encode("hmm " * max_tokens, add_special_tokens=False)[:max_tokens]
        else:
            ids = self.tokenizer.encode(self.scripts[task]["texts"][turn], add_special_tokens=False)
            ids = [*ids, self.tokenizer.eos_token_id][:max_tokens]
        log_probs = [LOG_PROB] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="completed")


def make_worker(model_dir: Path, data_dir: Path, tmp_path: Path, scripts, *, prompt_length: int,
                response_length: int, log_probs: bool = True, per_turn: int | None = None) -> AgentLoopWorker:
    entry = f"- name: shopsim\n  _target_: shopsimrl.train.verl.ShopAgentLoop\n  data_dir: {data_dir}\n"
    if per_turn is not None:
        entry += f"  max_tokens_per_turn: {per_turn}\n"
    loops = tmp_path / "agent_loop.yaml"
    loops.write_text(entry, encoding="utf-8")
    config = verl_config([
            f"actor_rollout_ref.model.path={model_dir}", "actor_rollout_ref.rollout.name=vllm",
            f"data.max_prompt_length={prompt_length}", f"data.max_response_length={response_length}",
            f"actor_rollout_ref.rollout.calculate_log_probs={log_probs}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
    ])
    return worker_for(config, scripts)


def verl_config(overrides: list[str]) -> Any:
    """verl's own trainer config (the one ``verl.trainer.main_ppo`` composes) with these overrides."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def worker_for(config: Any, scripts) -> AgentLoopWorker:
    worker = AgentLoopWorker(config, llm_client=None)
    worker.llm_client = ScriptedServer(worker.tokenizer, scripts)
    return worker

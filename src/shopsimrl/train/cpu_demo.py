"""``shopsimrl train cpu-demo``: a policy trained from scratch on a CPU through the production SFT → GRPO path.

Stages (each writes under ``--out``; docs/training.md#train-a-small-policy-on-cpu):

1. ``model/init``: a byte-level BPE trained on the catalog, the rules and the tool schemas, TRL's Qwen2.5 chat
   template, and a Qwen2-architecture model with random init (:mod:`shopsimrl.train.local_lm`).
2. ``demos``: the public-information policies (``heuristic``, ``strong``) played by ``shopsimrl eval`` on the
   persona *train* split and a seeded sample of the ``standard`` split, exported with ``export-sft
   --granularity turn`` (episodes with r_strict ≥ ``demo_min_reward``). Never the oracle, never val/test.
3. ``model/sft``: TRL's ``SFTTrainer``, assistant-only loss (TRL's Qwen2.5 training template marks the turns;
   :mod:`shopsimrl.train.cpu_demo_sft`).
4. ``model/grpo``: TRL's ``GRPOTrainer`` with the project's ``make_rollout_func`` on train tasks, r_strict.
5. ``eval/{init,first,heuristic,sft,grpo,sft-auto}``: each checkpoint served on a loopback OpenAI-compatible
   endpoint and measured by ``shopsimrl eval`` on the persona val split, beside the ``first`` and ``heuristic``
   policies on the same tasks (:mod:`shopsimrl.train.cpu_demo_eval`); ``compare.json``: SFT vs GRPO.
6. ``report.md`` and ``curves.png`` (:mod:`shopsimrl.train.cpu_demo_report`).

:mod:`shopsimrl.train.cpu_demo_run` runs them and records every invocation.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .cpu_demo_config import RecipeConfig


def _paths(out: Path) -> dict[str, Path]:
    return {"init": out / "model" / "init", "sft": out / "model" / "sft", "grpo": out / "model" / "grpo",
            "demos": out / "demos", "eval": out / "eval"}


def _torch_setup(cfg: RecipeConfig) -> None:
    import torch

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)


def _timed(cfg: RecipeConfig, name: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    print(f"[cpu-demo] stage {name} …", flush=True)
    value = fn()
    cfg.timings[name] = round(time.perf_counter() - start, 1)
    print(f"[cpu-demo] stage {name} done in {cfg.timings[name]:.0f} s", flush=True)
    return value


# --- 1. tokenizer and model ------------------------------------------------------------------------------------

def stage_init(cfg: RecipeConfig) -> dict[str, Any]:
    from .local_lm import PRESETS, build_model, build_tokenizer, corpus, parameter_count

    preset = PRESETS[cfg.model_preset]
    tokenizer = build_tokenizer(corpus(cfg.data, products=cfg.tokenizer_products), preset)
    model = build_model(tokenizer, preset, seed=cfg.seed)
    target = _paths(Path(cfg.out))["init"]
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return {"parameters": parameter_count(model), "vocab": len(tokenizer), "preset": asdict(preset)}


def load(path: Path, *, use_cpu: bool = True) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not path.is_dir():
        raise ConfigError(f"{path} is missing: run the stage that writes it first", code="recipe")
    from .local_lm import accelerated

    model: Any = AutoModelForCausalLM.from_pretrained(path)
    if accelerated(use_cpu):  # evaluation in bf16 on CUDA (training loads with use_cpu=True: the trainer places it)
        import torch

        model = model.to("cuda", dtype=torch.bfloat16)
    return model, AutoTokenizer.from_pretrained(path)


# --- 2. demonstrations -----------------------------------------------------------------------------------------

def _progress(total: int, desc: str) -> Any:
    import importlib

    tqdm: Any = importlib.import_module("tqdm.auto").tqdm
    return tqdm(total=total, desc=desc, unit="ep", mininterval=5.0)


def _eval_run(settings: Any, desc: str) -> Any:
    from ..eval.runner import evaluate

    bar = None

    def start(total: int, done: int) -> None:
        nonlocal bar
        bar = _progress(total, desc)
        bar.update(done)

    try:
        return evaluate(settings, on_start=start, on_record=lambda record: bar.update(1) if bar else None)
    finally:
        if bar is not None:
            bar.close()


def stage_demos(cfg: RecipeConfig) -> dict[str, Any]:
    from ..eval.runner import EvalSettings
    from .sft import collect, write_records

    demos = _paths(Path(cfg.out))["demos"]
    counts: dict[str, int] = {}
    episodes: dict[str, int] = {}
    records: list[dict[str, Any]] = []
    for policy in cfg.demo_policies:
        for split, limit, sample in (("train", cfg.demo_train_tasks, None), ("standard", None, cfg.demo_standard_tasks)):
            if sample == 0 or limit == 0:
                continue
            run = demos / f"{policy}-{split}"
            settings = EvalSettings(data=cfg.data, out=str(run), split=split, policy=policy, limit=limit,
                                    sample_size=sample, seed=cfg.seed, max_steps=cfg.max_turns, concurrency=8)
            _eval_run(settings, f"demos {policy} {split}")
            got = collect(run, min_reward=cfg.demo_min_reward, granularity="turn")
            for record in got:
                record["metadata"]["source"] = run.name
            counts[f"{policy}-{split}"] = len(got)
            episodes[f"{policy}-{split}"] = len({r["metadata"]["episode_id"] for r in got})
            records.extend(got)
    write_records(records, demos / "sft_turns.jsonl")
    # one record per accepted turn: the episodes and the turn records are counted per source, so each adds up
    return {"turn_records": counts, "episodes_by_source": episodes, "turns": len(records),
            "episodes": sum(episodes.values())}


# --- 3. SFT ----------------------------------------------------------------------------------------------------

def stage_sft(cfg: RecipeConfig) -> dict[str, Any]:
    from .cpu_demo_sft import COPY_BATCH, copy_rows, first_turn_rows, sft_phase, sft_rows, sft_tokens
    from .local_lm import TEMPLATE_FILE, TRAINING_TEMPLATE_FILE, chat_template

    paths = _paths(Path(cfg.out))
    source = paths["demos"] / "sft_turns.jsonl"
    if not source.is_file():
        raise ConfigError(f"{source} is missing: run the demos stage first", code="recipe")
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = sft_rows(records)
    if not rows:
        raise ConfigError("no demonstration reached the reward threshold", code="recipe")
    random.Random(cfg.seed).shuffle(rows)
    model, tokenizer = load(paths["init"])
    tokenizer.chat_template = chat_template(TRAINING_TEMPLATE_FILE)  # same text, plus the assistant-turn markers
    tokens = sft_tokens(rows, tokenizer)
    logs: list[dict[str, Any]] = []
    steps = {"short": 0, "first": 0, "lm": 0, "assistant": 0}
    for phase, count in (("short", cfg.sft_short_steps), ("first", cfg.sft_first_steps)):
        if count:
            trainer = sft_phase(replace(cfg, sft_batch=COPY_BATCH[phase]), model, tokenizer,
                                copy_rows(rows, tokens, phase, tokenizer), steps=count, name=phase,
                                scheduler="constant_with_warmup", output_dir=paths["sft"])
            done = sum(steps.values())
            model, steps[phase] = trainer.model, trainer.state.global_step
            logs += [{**h, "phase": phase, "step": h.get("step", 0) + done} for h in trainer.state.log_history]
    if cfg.sft_lm_steps:
        # every token: the page text is public, and predicting it is where copying is learned
        whole = [{"input_ids": t["input_ids"]} for t in tokens]
        trainer = sft_phase(cfg, model, tokenizer, whole, steps=cfg.sft_lm_steps, name="lm",
                            scheduler="constant_with_warmup", output_dir=paths["sft"])
        model, steps["lm"] = trainer.model, trainer.state.global_step
        done = steps["short"] + steps["first"]
        logs += [{**h, "phase": "lm", "step": h.get("step", 0) + done} for h in trainer.state.log_history]
        shift = (steps["lm"] * cfg.sft_batch) % len(tokens)
        # the trainer's sampler shuffles both phases with the same seed: rotate, so the second visits the
        # episodes in another order
        tokens = tokens[shift:] + tokens[:shift]
    if cfg.sft_steps:
        if cfg.sft_first_turn_share:
            tokens = first_turn_rows(tokens, cfg.sft_first_turn_share, cfg.seed)
        trainer = sft_phase(cfg, model, tokenizer, tokens, steps=cfg.sft_steps, name="assistant",
                            scheduler="linear", output_dir=paths["sft"])
        model, steps["assistant"] = trainer.model, trainer.state.global_step
        done = steps["short"] + steps["first"] + steps["lm"]
        logs += [{**h, "phase": "assistant", "step": h.get("step", 0) + done} for h in trainer.state.log_history]
    tokenizer.chat_template = chat_template(TEMPLATE_FILE)
    model.save_pretrained(paths["sft"])
    tokenizer.save_pretrained(paths["sft"])
    _write_jsonl(paths["sft"] / "log.jsonl", logs)
    total = sum(steps.values())
    seen = sum(steps[p] * COPY_BATCH[p] for p in COPY_BATCH) + (steps["lm"] + steps["assistant"]) * cfg.sft_batch
    return {"episodes": len(rows), "steps": total, "short_steps": steps["short"], "first_steps": steps["first"],
            "lm_steps": steps["lm"], "assistant_steps": steps["assistant"], "batch": cfg.sft_batch,
            "examples_seen": seen}


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(dict(r), ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                    encoding="utf-8")


# --- 4. GRPO ---------------------------------------------------------------------------------------------------

def stage_grpo(cfg: RecipeConfig) -> dict[str, Any]:
    from .cpu_demo_grpo import run_grpo

    paths = _paths(Path(cfg.out))
    model, tokenizer = load(paths["sft"])
    return run_grpo(cfg, model, tokenizer, paths["grpo"])

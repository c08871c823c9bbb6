"""CI smoke of the CPU recipe (``shopsimrl train cpu-demo``): the same stage code on the fixture catalog, a few SFT
and GRPO steps, then the served-checkpoint evaluation. Fails if a loss is not finite, a GRPO step changes no
weight, or every episode is a protocol error."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind

pytest.importorskip("trl", reason="the train extra (torch, transformers, trl, datasets) is not installed")

from shopsimrl.agent.policies import make_policy
from shopsimrl.env import ShopWorld
from shopsimrl.errors import ConfigError, DataError
from shopsimrl.testing.scripted import TemplatePolicyGenerate
from shopsimrl.train import cpu_demo, cpu_demo_config, cpu_demo_eval, cpu_demo_run, cpu_demo_sft
from shopsimrl.train.chat_template import episode_tools
from shopsimrl.train.cpu_demo_grpo import run_grpo
from shopsimrl.train.rollout import TurnRequest


def _config(data: Path, out: Path) -> cpu_demo_config.RecipeConfig:
    return cpu_demo_config.RecipeConfig(data=str(data), out=str(out), threads=1, eval_split="val", **{
        **cpu_demo_config.SMOKE, "sft_short_steps": 1, "sft_first_steps": 1, "sft_steps": 2, "sft_batch": 1, "grpo_steps": 1, "eval_tasks": 2, "grpo_max_groups": 2,
        "demo_train_tasks": 6, "demo_standard_tasks": 2})


class MixedGenerate(TemplatePolicyGenerate):
    """Episodes alternate between the heuristic and the random policy, so a group's rewards differ: the GRPO
    step then has a non-zero advantage (an untrained model earns 0 everywhere and would leave nothing to check)."""

    seen: ClassVar[dict[int, int]] = {}

    def __init__(self, tokenizer: Any, world: ShopWorld) -> None:
        super().__init__(tokenizer, make_policy("heuristic", world), tools=episode_tools())
        self.policies = [self.policy, make_policy("random", world)]

    def text_for(self, request: TurnRequest) -> str:
        index = self.seen.setdefault(id(request.messages), len(self.seen))  # one live history per episode
        self.policy = self.policies[index % 2]
        return super().text_for(request)


@pytest.mark.slow
def test_cpu_recipe_smoke(prepared_dir: Path, tmp_path: Path) -> None:
    import torch

    cfg = _config(prepared_dir, tmp_path / "run")
    cpu_demo._torch_setup(cfg)
    init = cpu_demo.stage_init(cfg)
    assert init["parameters"] > 0
    demos = cpu_demo.stage_demos(cfg)
    assert demos["episodes"] > 0  # public-information policies only: heuristic and strong
    sft = cpu_demo.stage_sft(cfg)
    assert (sft["short_steps"], sft["first_steps"], sft["lm_steps"], sft["assistant_steps"], sft["steps"]) == (1, 1, 2, 2, 6)
    paths = cpu_demo._paths(Path(cfg.out))
    sft_log = [json.loads(line) for line in (paths["sft"] / "log.jsonl").read_text().splitlines()]
    sft_losses = [row["loss"] for row in sft_log if "loss" in row]
    assert sft_losses and all(math.isfinite(x) for x in sft_losses)
    assert [row["step"] for row in sft_log if "loss" in row] == [1, 2, 3, 4, 5, 6]  # one curve over all phases
    assert [row["phase"] for row in sft_log if "loss" in row] == ["short", "first", "lm", "lm", "assistant", "assistant"]

    model, tokenizer = cpu_demo.load(paths["sft"])
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    world = ShopWorld.from_data_dir(prepared_dir)
    grpo = run_grpo(cfg, model, tokenizer, paths["grpo"],
                    generate_factory=lambda trainer: MixedGenerate(tokenizer, world))
    assert grpo["steps"] == 1
    after, _ = cpu_demo.load(paths["grpo"])
    changed = [name for name, p in after.named_parameters() if not torch.equal(p, before[name])]
    assert changed, "the GRPO step changed no weight"
    logs = [json.loads(line) for line in (paths["grpo"] / "log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(h["loss"]) for h in logs if "loss" in h)
    rollouts = [json.loads(line) for line in (paths["grpo"] / "rollouts.jsonl").read_text().splitlines()]
    assert rollouts and all(r["protocol_error_rate"] < 1.0 for r in rollouts)
    assert any(r["groups_kept"] > 0 for r in rollouts)  # a group with reward spread: the filter keeps it

    # the recipe's own sampler (tool_choice "required"): even the barely trained tiny model answers every turn
    # of every rollout with a call of the page's tools, so no episode is a protocol error
    assert cfg.tool_choice == "required"
    model, tokenizer = cpu_demo.load(paths["sft"])
    own = run_grpo(cfg, model, tokenizer, tmp_path / "grpo-own")
    assert own["steps"] == 1
    rollouts = [json.loads(line) for line in (tmp_path / "grpo-own" / "rollouts.jsonl").read_text().splitlines()]
    assert rollouts and all(r["protocol_error_rate"] == 0.0 for r in rollouts)

    # the served-checkpoint path: shopsimrl eval against the loopback endpoint (tool_choice "required": the
    # server constrains decoding to the request's tools), every episode completed and every turn a valid call
    row = cpu_demo_eval.evaluate_checkpoint(cfg, "grpo", paths["grpo"], paths["eval"] / "grpo")
    assert row["episodes"] == 2 and row["protocol_error_rate"] == 0.0
    manifest = json.loads((paths["eval"] / "grpo" / "manifest.json").read_text())
    assert '"tool_choice": "required"' in json.dumps(manifest)
    # the baselines run on the very tasks the checkpoints ran on (the table compares like with like)
    first = cpu_demo_eval.evaluate_policy(cfg, "first", paths["eval"] / "first")
    assert first["tasks_sha256"] == row["tasks_sha256"] and first["episodes"] == 2
    # the dynamic sampler's counts add up over the steps it logged
    grpo_rows = [json.loads(line) for line in (tmp_path / "grpo-own" / "rollouts.jsonl").read_text().splitlines()]
    assert own["groups"]["sampled"] == sum(r["groups_sampled_count"] for r in grpo_rows) >= cfg.groups_per_step


def test_out_and_report_mistakes_are_refused(prepared_dir: Path, tmp_path: Path) -> None:
    """``--out`` holding another kind of run (an eval run directory) is refused before anything is written, and
    ``--stages report`` where no stage has run is an error, not an empty report (issue 45)."""
    from shopsimrl.eval.runner import EvalSettings, evaluate

    run = tmp_path / "eval-run"
    evaluate(EvalSettings(data=str(prepared_dir), out=str(run), split="val", policy="first", limit=1, seed=0))
    before = sorted(p.name for p in run.iterdir())
    with raises_kind(ConfigError, "recipe", match="holds an eval run"):
        cpu_demo_run.run_recipe(cpu_demo_config.RecipeConfig(data=str(prepared_dir), out=str(run), stages=("init",)))
    assert sorted(p.name for p in run.iterdir()) == before
    (tmp_path / "file").write_text("x")
    with raises_kind(ConfigError, "recipe", match="is a file"):
        cpu_demo_run.run_recipe(cpu_demo_config.RecipeConfig(data=str(prepared_dir), out=str(tmp_path / "file")))
    with raises_kind(ConfigError, "recipe", match="nothing to report"):
        cpu_demo_run.run_recipe(cpu_demo_config.RecipeConfig(data=str(prepared_dir), out=str(tmp_path / "empty"),
                                                      stages=("report",)))
    assert not (tmp_path / "empty").exists()


def test_every_invocation_is_recorded(prepared_dir: Path, tmp_path: Path) -> None:
    """Stages run in separate invocations: results.json and config.json list each one (stages, arguments, wall
    time per stage), the report's invocation total is their sum, and the report names the preset."""
    out = tmp_path / "run"
    base = dict(cpu_demo_config.SMOKE, tokenizer_products=50, data=str(prepared_dir), out=str(out), threads=1)
    cpu_demo_run.run_recipe(cpu_demo_config.RecipeConfig(**{**base, "stages": ("init",)}), {"stages": "init"})
    results = cpu_demo_run.run_recipe(cpu_demo_config.RecipeConfig(**{**base, "stages": ("init", "report")}),
                                      {"stages": "init,report", "seed": 0})
    invocations = results["invocations"]
    assert [i["stages"] for i in invocations] == [["init"], ["init", "report"]]
    assert [i["arguments"] for i in invocations] == [{"stages": "init"}, {"stages": "init,report", "seed": 0}]
    assert all(set(i["wall_s"]) == set(i["stages"]) and i["total_s"] >= sum(i["wall_s"].values()) - 0.2
               for i in invocations)
    config = json.loads((out / "config.json").read_text())
    assert config["kind"] == cpu_demo_run.KIND and config["invocations"] == invocations
    report = (out / "report.md").read_text()
    total = sum(i["total_s"] for i in invocations)
    assert f"## Invocations (2; total {total:.0f} s)" in report and "preset `smoke` (model `tiny`)" in report


def _training_tokenizer(data: Path) -> Any:
    """A tiny byte-level BPE with TRL's Qwen2.5 training template (the assistant turns marked)."""
    from shopsimrl.train.local_lm import (
        PRESETS,
        TRAINING_TEMPLATE_FILE,
        build_tokenizer,
        chat_template,
        corpus,
    )

    tokenizer = build_tokenizer(corpus(data, products=200), PRESETS["tiny"])
    tokenizer.chat_template = chat_template(TRAINING_TEMPLATE_FILE)
    return tokenizer


def test_sft_tokens_render_each_call_as_demonstrated(prepared_dir: Path) -> None:
    """Every tool's demonstrated call is trained exactly as the validator reads it: no argument of another tool.

    (A ``datasets`` column built from the messages unifies the argument dicts of all rows, so a click rendered
    ``{"query": null, "value": …}``: the SFT checkpoint then answered with calls the validator refuses.)"""
    from shopsimrl.env.tools import TOOLS
    tokenizer = _training_tokenizer(prepared_dir)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in episode_tools(dialogue=True)}
    calls = []
    for tool in TOOLS:
        name = tool.name
        arguments = {key: f"{name}-{key}" for key in schemas[name]["required"]}
        calls.append((name, arguments))
    records = []
    for episode, (name, arguments) in enumerate([*calls, *reversed(calls)]):
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "c", "type": "function",
                         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}]
        records.append({"messages": messages, "metadata": {"source": "t", "episode_id": episode, "turn": 0}})
    rows = cpu_demo_sft.sft_rows(records)
    tokens = cpu_demo_sft.sft_tokens(rows, tokenizer)
    import datasets

    stored = datasets.Dataset.from_list(tokens)  # what the trainer reads back
    assert len(stored) == len(rows)
    for row, record in zip(stored, rows, strict=True):
        trained = tokenizer.decode([t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m])
        function = record["messages"][2]["tool_calls"][0]["function"]
        expected = json.dumps({"name": function["name"], "arguments": function["arguments"]}, ensure_ascii=False)
        assert f"<tool_call>\n{expected}\n</tool_call>" in trained
        assert "null" not in trained


def test_report_plots_both_sft_phases_and_marks_missing_stages(tmp_path: Path) -> None:
    """An SFT-only run still gets its curve picture (GRPO panels say "not run") and its report."""
    from shopsimrl.train.cpu_demo_report import plot_curves, write_report

    sft = tmp_path / "model" / "sft"
    sft.mkdir(parents=True)
    rows = [{"step": step, "loss": 3.0 / step, "phase": "lm" if step <= 3 else "assistant"} for step in range(1, 6)]
    (sft / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    picture = plot_curves(tmp_path, tmp_path / "curves.png")
    assert picture is not None and picture.stat().st_size > 1000
    written = write_report(tmp_path, {"sft": {"steps": 5, "episodes": 9, "examples_seen": 5}, "timings": {"sft": 1.0}})
    text = Path(written["report"]).read_text(encoding="utf-8")
    assert "| sft | 1 | 5 optimizer steps" in text and "![training curves](curves.png)" in text
    assert plot_curves(tmp_path / "empty", tmp_path / "none.png") is None
    phased = {"steps": 10, "episodes": 9, "examples_seen": 10, "short_steps": 2, "first_steps": 0, "lm_steps": 3,
              "assistant_steps": 5}
    text = Path(write_report(tmp_path, {"sft": phased, "timings": {"sft": 1.0}})["report"]).read_text(encoding="utf-8")
    assert "10 optimizer steps: short 2 + every-token 3 + assistant 5 (10 rows from 9 demonstration" in text  # phases that ran, in order


def test_first_turn_rows_are_prefixes_ending_with_the_first_call(prepared_dir: Path) -> None:
    """A first-turn row is its episode's context up to and including the first assistant turn, masked on that
    turn alone; the mix holds the requested share of them and every episode row unchanged."""
    tokenizer = _training_tokenizer(prepared_dir)

    def call(name: str, arguments: dict[str, str]) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}

    records = []
    for episode in range(7):
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": f"买一件羽绒服 {episode}"},
                    call("search", {"query": f"羽绒服 {episode}"}), {"role": "tool", "content": "结果页"},
                    call("click", {"value": "buy now"})]
        records.append({"messages": messages, "metadata": {"source": "t", "episode_id": episode, "turn": 1}})
    tokens = cpu_demo_sft.sft_tokens(cpu_demo_sft.sft_rows(records), tokenizer)
    mixed = cpu_demo_sft.first_turn_rows(tokens, 0.6, seed=0)
    episodes = [row for row in mixed if row in tokens]
    prefixes = [row for row in mixed if row not in tokens]
    assert len(episodes) == len(tokens) and len(prefixes) == round(7 * 0.6 / 0.4)
    for row in prefixes:
        assert len(row["input_ids"]) == len(row["assistant_masks"]) and row["assistant_masks"][-1] == 1
        whole = next(t for t in tokens if t["input_ids"][: len(row["input_ids"])] == row["input_ids"])
        assert whole["assistant_masks"][: len(row["input_ids"])] == row["assistant_masks"]
        trained = tokenizer.decode([t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m])
        assert '"name": "search"' in trained and "buy now" not in trained
    rows = cpu_demo_sft.sft_rows(records)
    short = cpu_demo_sft.copy_rows(rows, tokens, "short", tokenizer)
    assert len(short) == len(rows)
    for row, conversation in zip(short, rows, strict=True):  # the request and the first call, nothing else
        text = tokenizer.decode(row["input_ids"])
        assert conversation["messages"][1]["content"] in text and "<tools>" not in text and "结果页" not in text
        trained = tokenizer.decode([t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m])
        assert '"name": "search"' in trained and "buy now" not in trained
    first = cpu_demo_sft.copy_rows(rows, tokens, "first", tokenizer)
    assert len(first) == len(tokens) and all(row not in tokens and row in prefixes for row in first)
    with raises_kind(ConfigError, "recipe"):
        cpu_demo_sft.copy_rows(rows, tokens, "whole", tokenizer)
    assert cpu_demo_sft.first_turn_rows(tokens, 0.0, seed=0) != []
    assert mixed == cpu_demo_sft.first_turn_rows(tokens, 0.6, seed=0)  # seeded shuffle
    with raises_kind(ConfigError, "recipe"):
        cpu_demo_sft.first_turn_rows(tokens, 1.0, seed=0)
    with raises_kind(ConfigError, "recipe", match="sft_first_turn_share"):  # refused before any stage runs
        cpu_demo_config.RecipeConfig(data=str(prepared_dir), out="unused", sft_first_turn_share=1.0)
    with raises_kind(ConfigError, "recipe", match="grpo_max_groups"):
        cpu_demo_config.RecipeConfig(data=str(prepared_dir), out="unused", grpo_max_groups=1)
    with raises_kind(DataError, "difficulty"):
        cpu_demo_config.RecipeConfig(data=str(prepared_dir), out="unused", grpo_difficulty="easy")


def test_tokenizer_text_holds_no_held_out_request_nor_goal_field(prepared_dir: Path, tmp_path: Path) -> None:
    """The tokenizer's training text (issue 46): public product fields, the rules, the tool schemas and train
    requests only. No val or test request (full or simple form) is in it, no record's ``instructions`` or
    ``user_persona``, and rewriting every goal field of every product leaves it unchanged."""
    import gzip
    import shutil

    from shopsimrl.catalog.store import Catalog
    from shopsimrl.train.local_lm import PUBLIC_PRODUCT_FIELDS, corpus

    texts = corpus(prepared_dir)
    joined = "\n".join(texts)
    catalog = Catalog.from_data_dir(prepared_dir)
    held_out = [catalog.goal(t) for split in ("val", "test") for t in catalog.split(split)]
    train = [catalog.goal(t)["instruction_text"] for t in catalog.split("train")]
    catalog.close()
    assert held_out and train
    for goal in held_out:  # the whole held-out population
        assert goal["instruction_text"] not in joined and goal["instruction_simple"] not in joined
    assert all(request in texts for request in train)  # train requests at most, and then whole
    for key in ("instructions", "instruction", "user_persona", "__reasoning__", "price_upper"):
        assert f'"{key}"' not in joined
    products = json.loads(gzip.decompress((prepared_dir / "products.json.gz").read_bytes()))
    assert any(set(p) - set(PUBLIC_PRODUCT_FIELDS) for p in products)  # the filter has something to drop
    copy = tmp_path / "data"
    shutil.copytree(prepared_dir, copy)
    for p in products:
        p["instructions"] = [{"instruction": "LEAK"}]
        p["user_persona"] = {"LEAK": "LEAK"}
        p["full_description"] = "LEAK"
    (copy / "products.json.gz").write_bytes(gzip.compress(json.dumps(products, ensure_ascii=False).encode()))
    # (the copy fails the catalog's integrity check, so its requests are not read: the product part is compared)
    assert corpus(copy, train_requests=False) == texts[: len(texts) - len(train)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, None]), min_size=2, max_size=2), min_size=8, max_size=8),
       st.integers(1, 3), st.integers(0, 5))
def test_dynamic_sampling_keeps_groups_with_spread(rewards: list[list[float | None]], want: int, extra: int) -> None:
    """DAPO's dynamic sampling over any sequence of group outcomes: groups are drawn in order until ``want`` have
    reward spread or ``want + extra`` were drawn; the update holds ``want`` groups, those with spread first, and
    the counts add up (sampled = kept + zero-spread + unscored)."""
    from shopsimrl.train.cpu_demo_grpo import dynamic_rollout

    tasks = iter(str(i) for i in range(1, 100))
    max_groups = want + extra
    by_task = {str(i): group for i, group in enumerate(rewards)}
    rolled: list[str] = []

    def roll(prompts: list[str]) -> dict[str, Any]:
        heads = prompts[::2]
        rolled.extend(heads)
        return {"shop_reward": [r for task in heads for r in by_task[task]], "prompt_ids": [[int(p)] for p in prompts]}

    out, counts = dynamic_rollout(roll, ["0", "0"] * want, group_size=2, want=want, max_groups=max_groups,
                                  stream=tasks)
    spread = [t for t in rolled if None not in by_task[t] and len(set(by_task[t])) > 1]
    assert counts["sampled"] == len(rolled) == counts["kept"] + counts["zero_spread"] + counts["unscored"]
    assert counts["kept"] == len(spread) and counts["trained"] == min(want, len(spread))
    # without dynamic sampling the update would hold the step's own groups: those of its first batch with spread
    assert counts["first_kept"] == sum(1 for t in rolled[:want] if t in spread) <= counts["kept"]
    assert counts["kept"] >= want or counts["sampled"] >= max_groups  # it stops only when done or out of budget
    assert len(out["shop_reward"]) == 2 * want and len(out["prompt_ids"]) == 2 * want
    trained = [str(out["prompt_ids"][i][0]) for i in range(0, 2 * want, 2)]
    assert trained[: counts["trained"]] == spread[: counts["trained"]]  # groups with spread first, in draw order


@pytest.mark.slow
def test_device_check_script_runs_the_batched_path_on_cpu(prepared_dir: Path, tmp_path: Path) -> None:
    """scripts/device_check.sh with DEVICE_CHECK_TINY=1: the gpu preset's code path (batched decoding in GRPO
    and the evaluation server) end to end on the CPU, and the figures it prints. Never run on a GPU here."""
    import os
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "scripts" / "device_check.sh"
    env = {**os.environ, "DEVICE_CHECK_TINY": "1", "DATA": str(prepared_dir), "OUT": str(tmp_path / "check"),
           "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("[device-check]")]
    assert any("CUDA False" in line for line in lines)
    assert any(line.startswith("[device-check] grpo step 1:") for line in lines)
    rollouts = (tmp_path / "check" / "model" / "grpo" / "rollouts.jsonl").read_text().splitlines()
    assert json.loads(rollouts[0])["decode_batch_mean"] > 1.0  # concurrent episodes' turns shared batches
    for row in ("init", "random", "first", "heuristic", "sft", "grpo", "sft-auto"):
        assert any(line.startswith(f"[device-check] eval {row} ") for line in lines), row
    config = json.loads((tmp_path / "check" / "config.json").read_text())
    assert config["batched_decoding"] and config["grpo_concurrency"] == 4


def test_group_totals_state_the_counts_without_dynamic_sampling() -> None:
    """Summed over the steps: the groups trained with dynamic sampling, and the steps' own groups with spread
    (what the update would have held without it), both in results.json and in the report's sentence."""
    from shopsimrl.train.cpu_demo_grpo import group_totals
    from shopsimrl.train.cpu_demo_report import _groups

    rows = [{"groups_sampled_count": s, "groups_kept_count": k, "groups_zero_spread_count": s - k,
             "groups_unscored_count": 0, "groups_trained_count": min(k, 2), "groups_first_kept_count": f}
            for s, k, f in ((8, 0, 0), (4, 2, 1), (2, 2, 2), (6, 1, 0))]
    totals = group_totals(rows)
    assert totals == {"sampled": 20, "kept": 5, "zero_spread": 15, "unscored": 0, "trained": 5,
                      "informative_steps": 3, "first_kept": 3, "first_informative_steps": 2}
    text = " ".join(_groups({"groups": totals, "dynamic": True, "steps": 4, "groups_per_step": 2,
                             "difficulty": "first,heuristic"}))
    assert "would have held 3 of 8 groups with reward spread" in text and "on 2 informative steps" in text
    assert "difficulty tiers first,heuristic" in text
    assert "would have held" not in " ".join(_groups({"groups": totals, "dynamic": False, "steps": 4}))
    del rows[0]["groups_first_kept_count"]  # an earlier run's log, without the field: no figure is made up
    assert "first_kept" not in group_totals(rows)


def test_grpo_difficulty_defaults_and_tiers_computed_once(prepared_dir: Path, tmp_path: Path) -> None:
    """The cpu preset's GRPO stream is the first,heuristic tiers (``--difficulty all``: every train task), and a
    catalog without tiers gets them computed before the stream is read."""
    import argparse
    import dataclasses
    import shutil

    from shopsimrl.catalog.tiers import TIERS_FILE, read_tiers, split_task_ids
    from shopsimrl.train.cpu_demo_grpo import train_task_ids

    def parsed(**kw: Any) -> cpu_demo_config.RecipeConfig:
        return cpu_demo_run.config_from_args(argparse.Namespace(**{"preset": "cpu", "data": "d", "out": "o", "seed": 0,
                                                                   "stages": None, **kw}))

    assert parsed().grpo_difficulty == "first,heuristic" and not parsed().eval_init
    assert parsed(grpo_difficulty="all").grpo_difficulty is None
    assert parsed(preset="smoke").grpo_difficulty is None and parsed(preset="smoke").eval_init
    data = tmp_path / "data"
    shutil.copytree(prepared_dir, data)
    assert not (data / TIERS_FILE).exists()
    cfg = cpu_demo_config.RecipeConfig(data=str(data), out=str(tmp_path / "run"))
    ids = train_task_ids(cfg)  # the tiers are computed first, then the stream is those tiers' train tasks
    stored = (data / TIERS_FILE).stat().st_mtime_ns
    tiers = read_tiers(data)
    assert ids and sorted(ids) == sorted(t for t in split_task_ids(data, "train") if tiers[t] in ("first", "heuristic"))
    assert train_task_ids(cfg) == ids and (data / TIERS_FILE).stat().st_mtime_ns == stored  # once, same order
    every = train_task_ids(dataclasses.replace(cfg, grpo_difficulty=None))
    assert sorted(every) == sorted(split_task_ids(data, "train"))

"""The SFT stage's pieces of the CPU recipe: demonstration turn records → conversations → tokens → TRL's
``SFTTrainer`` (the stage itself, two phases and the log, is :func:`shopsimrl.train.cpu_demo.stage_sft`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .cpu_demo_config import RecipeConfig


def sft_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Turn records → one conversation per episode, rendered with the episode tools (as the rollouts are).

    A turn record is a prefix of its episode's last one and, since the rollouts render the same tool list every
    turn, the last record carries every turn's exact context: training it with an assistant-only loss trains
    each demonstrated turn once, for a quarter of the compute of one sequence per turn.
    """
    from .chat_template import episode_tools
    from .checkpoint_server import template_messages

    last: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for record in records:
        meta = record["metadata"]
        key = (meta.get("source"), meta["episode_id"])
        if key not in last or meta["turn"] > last[key]["metadata"]["turn"]:
            last[key] = record
    tools = episode_tools()
    return [{"messages": template_messages(r["messages"]), "tools": tools}
            for _, r in sorted(last.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))]


def sft_tokens(rows: Sequence[Mapping[str, Any]], tokenizer: Any) -> list[dict[str, list[int]]]:
    """Conversations → ``input_ids`` and ``assistant_masks``, the call TRL's SFTTrainer makes for a messages row.

    Tokenized here, not by TRL from a ``messages`` column: a ``datasets`` column unifies the tool-call argument
    dicts of every row into one struct, so a search call would render ``{"query": …, "value": null}`` and a click
    ``{"query": null, "value": …}``, and the model would learn calls the validator refuses (measured: 87% of the
    SFT checkpoint's turns were protocol errors). The tokenizer's chat template must mark the assistant turns.
    """
    out = []
    for row in rows:
        encoded = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True,
                                                return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = list(encoded["input_ids"]), list(encoded["assistant_masks"])
        if 1 not in mask:
            raise ConfigError("the chat template marks no assistant token (it needs {% generation %} markers)", code="recipe")
        out.append({"input_ids": ids, "assistant_masks": mask})
    return out


def first_turn_prefixes(tokens: Sequence[Mapping[str, list[int]]]) -> list[dict[str, list[int]]]:
    """Each episode's context up to and including its first assistant turn (the request → the search call),
    masked on that turn alone: where a model made from scratch must copy the request, at a quarter of the
    episode's tokens."""
    prefixes = []
    for row in tokens:
        mask = row["assistant_masks"]
        end = mask.index(1)
        while end < len(mask) and mask[end] == 1:
            end += 1
        prefixes.append({"input_ids": list(row["input_ids"][:end]), "assistant_masks": list(mask[:end])})
    return prefixes


def first_turn_rows(tokens: Sequence[Mapping[str, list[int]]], share: float, seed: int) -> list[dict[str, list[int]]]:
    """Whole episodes plus first-turn prefixes, ``share`` of the rows being prefixes, in a seeded order.

    Mixing prefixes in trains the copy more often for the same compute, while the whole episodes keep the rest of
    the episode trained (a first-turn phase on its own forgets it: docs/training.md).
    """
    import random

    if not 0.0 <= share < 1.0:
        raise ConfigError(f"the first-turn share must be in [0, 1), not {share}", code="recipe")
    rows = [dict(t) for t in tokens]
    prefixes = first_turn_prefixes(tokens)
    wanted = round(len(rows) * share / (1.0 - share))
    mixed = rows + ([prefixes[i % len(prefixes)] for i in range(wanted)] if prefixes else [])
    random.Random(seed).shuffle(mixed)
    return mixed


COPY_BATCH = {"short": 16, "first": 2}  # rows per optimizer step of each copy-curriculum phase (short rows are ~130 tokens)


def copy_rows(rows: Sequence[Mapping[str, Any]], tokens: Sequence[Mapping[str, list[int]]], phase: str,
              tokenizer: Any) -> list[dict[str, list[int]]]:
    """The rows of a copy-curriculum phase: ``short`` (the request and the first call alone, no rules, persona
    or tool schemas; a one-character system message keeps the template from adding its default one) or
    ``first`` (the full first-turn prompt and the first call).

    A model made from scratch learns to copy the request into its query from short rows in minutes and, trained
    on the full prompt next, carries it over; from the full prompt alone it does not learn it in the same time
    (benchmarks/bench_cpu_copy.py, docs/training.md).
    """
    if phase == "short":
        return sft_tokens([{"messages": [{"role": "system", "content": "s"}, *row["messages"][1:3]], "tools": []}
                           for row in rows], tokenizer)
    if phase == "first":
        return first_turn_prefixes(tokens)
    raise ConfigError(f"unknown copy phase {phase!r} (short or first)", code="recipe")


def sft_phase(cfg: RecipeConfig, model: Any, tokenizer: Any, rows: list[dict[str, list[int]]], *, steps: int,
              name: str, scheduler: str, output_dir: Path) -> Any:
    """One SFT phase with TRL's ``SFTTrainer`` on pre-tokenized rows (``assistant_masks`` masks the loss)."""
    import importlib

    import datasets

    trl: Any = importlib.import_module("trl")

    from .local_lm import accelerated, time_budget

    args = trl.SFTConfig(output_dir=str(output_dir / f"trainer-{name}"), max_steps=steps,
                         per_device_train_batch_size=cfg.sft_batch, learning_rate=cfg.sft_lr,
                         lr_scheduler_type=scheduler, warmup_steps=min(10, max(1, steps // 20)), weight_decay=0.0,
                         assistant_only_loss=False,  # the dataset's assistant_masks column masks the loss (TRL applies it)
                         max_length=cfg.max_context + cfg.max_turns * cfg.max_new_tokens, logging_steps=1,
                         save_strategy="no", report_to=[], use_cpu=cfg.use_cpu, bf16=accelerated(cfg.use_cpu), seed=cfg.seed,
                         dataloader_num_workers=0, dataset_num_proc=None,
                         gradient_checkpointing=False)  # on by default in TRL: pure overhead for a model this small
    trainer: Any = trl.SFTTrainer(model=model, args=args, train_dataset=datasets.Dataset.from_list(rows),
                                  processing_class=tokenizer, callbacks=time_budget(cfg.sft_minutes))
    trainer.train()
    return trainer

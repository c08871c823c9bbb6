"""The task-row codec: how every trainer adapter writes a task into its trainer's dataset row and reads it back.

Each trainer hands its adapter one row per episode in its own layout; the codec holds all four, so a task id or
a shopper is written and read by one rule:

================================  ==============================  =======================================
adapter                           row                             task id / shopper / split / difficulty
================================  ==============================  =======================================
TRL ``rollout_func`` (trl.py)     the ``prompt`` text             ``"17"`` / ``"17@rule"``; a
                                                                  ``difficulty`` column beside it
TRL environment (trl_environment)  columns ``prompt`` (chat),      ``task_id`` / ``shopper`` columns
                                  ``task_id``, ``shopper``
verl (verl.py)                    the agent loop's keyword        ``extra_info.task_id`` / ``.shopper`` /
                                  arguments (a parquet row)       ``.split`` / ``.difficulty``
slime (slime.py)                  a ``Sample`` (a JSONL line)     ``metadata.task_id`` (else the
                                                                  ``prompt`` text) / ``.shopper`` / …
================================  ==============================  =======================================

A task id field is read by the contract's one check (:func:`shopsimrl.contract.check_task_id`: an ``int``,
never a ``bool``, a float or a string); a task id written as text (a prompt) must be a plain decimal number.
A shopper is :func:`~shopsimrl.train.rollout.parse_shopper`'s. A row that fails is :class:`AdapterError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import check_task_id
from ..errors import AdapterError, ShopSimError
from .rollout import parse_shopper

SHOPPER_SEPARATOR = "@"  # TRL prompt text: "17@rule"
TASKS_SCHEMA = "shopsimrl-slime-tasks-v1"  # slime lines' metadata.schema_version
AGENT_NAME = "shopsim"  # verl rows' agent_name (the agent-loop config's name)
DATA_SOURCE = "shopsimrl"
_DECIMAL = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class TaskRow:
    """What a row says: the task, its shopper (dialogue mode), its split and its difficulty tier."""

    task_id: int
    shopper: str | None = None
    split: str = "train"
    difficulty: str | None = None


def task_id_field(raw: object, where: str) -> int:
    """A row's task id field, by the contract's check."""
    try:
        return check_task_id(raw)
    except ShopSimError as exc:
        raise AdapterError(f"{where}: {raw!r} is not a task id (an integer)") from exc


def task_id_text(raw: object, where: str) -> int:
    """A task id written as text (a prompt): a plain decimal number, surrounding blanks ignored."""
    text = raw.strip() if isinstance(raw, str) else ""
    if not _DECIMAL.fullmatch(text):
        raise AdapterError(f"{where}: {raw!r} is not a task id (a decimal number)")
    return task_id_field(int(text), where)


def shopper_field(raw: object, where: str) -> str | None:
    try:
        return parse_shopper(raw)
    except ShopSimError as exc:
        raise AdapterError(f"{where}: {exc}") from exc


def rows_of(task_ids: Sequence[object], *, shopper: str | None = None, split: str = "train",
            tiers: Mapping[int, str] | None = None) -> list[TaskRow]:
    """The rows a builder writes: one per task id (each checked), with the builder's shopper, split and tiers."""
    shopper = shopper_field(shopper, "shopper")
    ids = [task_id_field(t, "task id") for t in task_ids]
    return [TaskRow(t, shopper, split, tiers[t] if tiers is not None else None) for t in ids]


# ------------------------------------------------------------------------------- TRL rollout_func: prompt text
def prompt_text(row: TaskRow) -> str:
    return f"{row.task_id}{SHOPPER_SEPARATOR}{row.shopper}" if row.shopper else str(row.task_id)


def prompt_columns(rows: Sequence[TaskRow], *, difficulty: bool = False) -> dict[str, list[Any]]:
    """``prompt`` (the text), ``task_id`` and ``shopper`` for readers of the dataset, and ``difficulty``."""
    columns: dict[str, list[Any]] = {"prompt": [prompt_text(r) for r in rows], "task_id": [r.task_id for r in rows],
                                     "shopper": [r.shopper or "" for r in rows]}
    if difficulty:
        columns["difficulty"] = [r.difficulty for r in rows]
    return columns


def parse_prompt(prompt: Any) -> TaskRow:
    """A prompt (``"17"``, ``"17@rule"``, or a conversation whose last message is one)."""
    text = prompt if isinstance(prompt, str) else (prompt[-1].get("content") if isinstance(prompt, list) and prompt
                                                   and isinstance(prompt[-1], Mapping) else None)
    task, _, shopper = (text or "").strip().partition(SHOPPER_SEPARATOR)
    where = f"prompt {prompt!r} is not a task id (optionally @shopper)"
    return TaskRow(task_id_text(task, where), shopper_field(shopper.strip(), where))


# ------------------------------------------------------------------------------- TRL environment_factory: columns
def environment_columns(rows: Sequence[TaskRow], system_prompt: str, *, dialogue: bool = False
                        ) -> dict[str, list[Any]]:
    """A system prompt and an empty user turn (the reset's text is appended to it), ``task_id`` and, for
    dialogue rows, ``shopper``."""
    columns: dict[str, list[Any]] = {
        "prompt": [[{"role": "system", "content": system_prompt}, {"role": "user", "content": ""}] for _ in rows],
        "task_id": [r.task_id for r in rows]}
    if dialogue:
        columns["shopper"] = [r.shopper for r in rows]
    return columns


def parse_environment_row(row: Mapping[str, Any]) -> TaskRow:
    """The ``task_id`` column, else the ``prompt`` (its text, or a conversation's last message) as a task id."""
    if "task_id" in row:
        task_id = task_id_field(row["task_id"], "row's task_id column")
    else:
        prompt = row.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
            prompt = prompt[-1].get("content")
        task_id = task_id_text(prompt, "row without a task_id column, its prompt")
    return TaskRow(task_id, shopper_field(row.get("shopper"), "row's shopper column"))


# ------------------------------------------------------------------------------- verl: parquet rows, extra_info
def verl_row(row: TaskRow, instruction: str | None) -> dict[str, Any]:
    """One verl dataset row; its ``prompt`` is the instruction (for verl's dataset and logs; the model's real
    prompt comes from the reset), or for a dialogue row a line naming the task (the agent never sees the
    instruction, so the row does not carry it)."""
    text = f"shopsim dialogue task {row.task_id} ({row.shopper} shopper)" if row.shopper else str(instruction)
    extra: dict[str, Any] = {"task_id": row.task_id, "split": row.split, "index": row.task_id}
    if row.shopper:
        extra["shopper"] = row.shopper
    if row.difficulty is not None:
        extra["difficulty"] = row.difficulty
    return {"data_source": DATA_SOURCE, "agent_name": AGENT_NAME, "prompt": [{"role": "user", "content": text}],
            "ability": "shopping", "reward_model": {"style": "environment", "ground_truth": str(row.task_id)},
            "extra_info": extra}


def parse_verl_row(kwargs: Mapping[str, Any]) -> TaskRow:
    """``extra_info.task_id`` (a top-level ``task_id`` when ``extra_info`` has none) and ``extra_info.shopper``."""
    extra = kwargs.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        extra = {}
    shopper = shopper_field(extra.get("shopper"), "extra_info.shopper")
    task_id = task_id_field(extra.get("task_id", kwargs.get("task_id")), "a shopsim row needs extra_info.task_id")
    difficulty = extra.get("difficulty")
    return TaskRow(task_id, shopper, str(extra.get("split", "train")),
                   None if difficulty is None else str(difficulty))


# ------------------------------------------------------------------------------- slime: JSONL lines, metadata
def slime_line(row: TaskRow) -> dict[str, Any]:
    """One slime task line: the prompt is the task id (the real prompt comes from the reset)."""
    meta: dict[str, Any] = {"schema_version": TASKS_SCHEMA, "task_id": row.task_id, "split": row.split}
    if row.shopper:
        meta["shopper"] = row.shopper
    if row.difficulty is not None:
        meta["difficulty"] = row.difficulty
    return {"prompt": str(row.task_id), "metadata": meta}


def parse_slime_sample(sample: Any) -> TaskRow:
    """``metadata.task_id`` (else the ``prompt`` text), ``metadata.shopper``, ``.split`` and ``.difficulty``."""
    meta = getattr(sample, "metadata", None) or {}
    if "task_id" in meta:
        task_id = task_id_field(meta["task_id"], "sample's metadata.task_id")
    else:
        task_id = task_id_text(getattr(sample, "prompt", None), "sample without metadata.task_id, its prompt")
    difficulty = meta.get("difficulty")
    return TaskRow(task_id, shopper_field(meta.get("shopper"), "metadata.shopper"), str(meta.get("split", "train")),
                   None if difficulty is None else str(difficulty))

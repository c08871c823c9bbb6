"""SFT export: successful trajectories of a run directory → chat-format records with tools (JSONL or Parquet).

The warm start before RL (SFT then RL beats RL alone) needs the exact conversations a strong model or the
oracle played. Records come from ``traces.jsonl`` (the last record of each episode, completed ones only) with
``final.reward_detail.r_strict >= min_reward``. Two granularities:

* ``episode`` (default): the conversation up to the last assistant message, with ``tools`` of the last turn
  and ``turn_tools`` (the tools each assistant turn saw, since the click enum changes every page);
* ``turn``: one record per accepted model turn: the conversation up to that assistant message and the exact
  tools offered on that turn — what a chat template would render at that point.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import AdapterError

SFT_SCHEMA = "shopsimrl-sft-v1"
GRANULARITIES = ("episode", "turn")


def _assistant_indices(conversation: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(conversation) if m.get("role") == "assistant" and m.get("tool_calls")]


def records_from_trace(trace: dict[str, Any], granularity: str = "episode") -> Iterator[dict[str, Any]]:
    conversation = trace.get("conversation") or []
    steps = [s for s in trace.get("steps") or [] if s.get("action") is not None]
    assistants = _assistant_indices(conversation)
    # the assistant messages of accepted turns are those followed by an environment observation, in order
    accepted = [i for i in assistants
                if i + 1 < len(conversation) and conversation[i + 1].get("role") == "tool"
                and not str(conversation[i + 1].get("content", "")).startswith('{"type":"tool_protocol_error"')]
    if len(accepted) != len(steps) or not accepted:
        raise AdapterError(f"{trace.get('episode_id')}: conversation and steps do not line up", code="sft_export")
    detail = (trace.get("final") or {}).get("reward_detail") or {}
    meta = {"schema_version": SFT_SCHEMA, "episode_id": trace["episode_id"], "task_id": trace["job"]["task_id"],
            "r_strict": detail.get("r_strict"), "r_success": detail.get("r_success"),
            "model": (trace.get("provenance") or {}).get("model")}
    if granularity == "turn":
        for k, (index, step) in enumerate(zip(accepted, steps, strict=True)):
            yield {"messages": conversation[: index + 1], "tools": step["tools"], "metadata": {**meta, "turn": k}}
        return
    last = accepted[-1]
    yield {"messages": conversation[: last + 1], "tools": steps[-1]["tools"],
           "turn_tools": [step["tools"] for step in steps], "metadata": meta}


def collect(run: str | os.PathLike[str], *, min_reward: float = 1.0, granularity: str = "episode"
            ) -> list[dict[str, Any]]:
    from ..eval.rundir import TRACES_FILE, is_completed, latest_records

    if granularity not in GRANULARITIES:
        raise AdapterError(f"granularity must be one of {GRANULARITIES}", code="sft_export")
    path = Path(run) / TRACES_FILE
    if not path.is_file():
        raise AdapterError(f"{run} is not a run directory (no {TRACES_FILE})", code="sft_export")
    out: list[dict[str, Any]] = []
    for episode_id, trace in sorted(latest_records(path).items()):
        if not is_completed(trace):
            continue
        reward = ((trace.get("final") or {}).get("reward_detail") or {}).get("r_strict")
        if not isinstance(reward, (int, float)) or reward < min_reward:
            continue
        out.extend(records_from_trace(trace, granularity))
        del episode_id
    return out


OUTPUT_SUFFIXES = (".jsonl", ".parquet")


def check_output_path(out: str | os.PathLike[str]) -> Path:
    """The output path, refused unless it names a format we write (a ``.csv`` must not silently get JSONL)."""
    target = Path(out)
    if target.suffix.lower() not in OUTPUT_SUFFIXES:
        raise AdapterError(
            f"--out {target}: unknown output format {target.suffix or '(no extension)'!r}; "
            f"use a name ending in {' or '.join(OUTPUT_SUFFIXES)}", code="sft_export"
        )
    return target


def check_min_reward(min_reward: float) -> float:
    """``r_strict`` lies in [0, 1]: a threshold outside it selects everything or nothing, which is a typo."""
    if not 0.0 <= min_reward <= 1.0:
        raise AdapterError(f"--min-reward must be between 0 and 1 (r_strict's range), got {min_reward:g}", code="sft_export")
    return min_reward


def write_records(records: list[dict[str, Any]], out: str | os.PathLike[str]) -> Path:
    """JSONL, or Parquet through ``datasets`` when the name ends in ``.parquet`` (nested fields as JSON text).

    Every key of a record becomes a column, so Parquet carries ``turn_tools`` exactly as JSONL does.
    """
    target = check_output_path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix.lower() == ".parquet":
        try:
            import datasets
        except ImportError as exc:
            raise AdapterError("Parquet output needs `pip install 'shopsimrl[train]'` (datasets)", code="sft_export") from exc
        columns = sorted({key for record in records for key in record}) or ["messages", "tools", "metadata"]
        rows = [{key: json.dumps(r[key], ensure_ascii=False) if key in r else None for key in columns}
                for r in records]
        datasets.Dataset.from_list(rows, features=datasets.Features(
            {k: datasets.Value("string") for k in columns})).to_parquet(str(target))
        return target
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return target

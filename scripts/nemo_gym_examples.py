"""Regenerate the NeMo Gym-style example data: ``examples/nemo_gym/data/example{.jsonl,_metrics.json,_rollouts.jsonl}``.

    python scripts/nemo_gym_examples.py [--data DIR] [--policy heuristic] [--count 5]

One command after a catalog change. ``--data`` defaults to the user-cache default catalog (built on first use).
``example.jsonl`` holds the first ``--count`` test tasks as NeMo Gym rows: ``responses_create_params`` (the
runtime's exact system prompt and first user message as Responses API ``input``, the first page's function tools)
plus ``task_id``, ``split`` and the version stamps; ``example_rollouts.jsonl`` one episode of the built-in policy
per row (the Responses API ``output`` items it produced and its ``reward``, r_strict); ``example_metrics.json`` the
rows' and rollouts' aggregate figures. ``tests/test_nemo_gym_examples.py`` checks all three.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "examples" / "nemo_gym" / "data"


def responses_tools(chat_tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as Responses API function tools (the function's fields at top level)."""
    return [{"type": "function", "name": t["function"]["name"], "description": t["function"].get("description", ""),
             "parameters": t["function"]["parameters"], "strict": False} for t in chat_tools]


def responses_output(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The episode after the prompt as Responses API output items (function calls and their outputs)."""
    items: list[dict[str, Any]] = []
    for message in conversation[2:]:
        if message["role"] == "assistant":
            if message.get("content"):
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": message["content"]}]})
            for call in message.get("tool_calls") or ():
                items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})
        elif message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
    return items


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"Mean": round(sum(values) / len(values), 4), "Min": min(values), "Max": max(values)}


def build(data: Path, policy: str, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment
    from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
    from shopsimrl.env import ShopWorld
    from shopsimrl.stamps import catalog_stamps, task_set_sha256

    world = ShopWorld.from_data_dir(data)
    tasks = list(world.catalog.split("test"))[:count]
    stamps = {**catalog_stamps(world.catalog.root, world.catalog.manifest),
              "task_set_sha256": task_set_sha256(("test", t) for t in tasks)}
    runtime = AgentRuntime(BuiltinPolicyModel.named(policy, world), InProcessEnvironment(world))
    rows, rollouts = [], []
    for task_id in tasks:
        record = asyncio.run(runtime.run(EpisodeJob(task_id=task_id, split="test")))
        conversation = record["conversation"]
        params = {"input": [{"role": m["role"], "content": m["content"]} for m in conversation[:2]],
                  "tools": responses_tools(record["steps"][0]["tools"]), "parallel_tool_calls": False}
        row = {"responses_create_params": params, "task_id": task_id, "split": "test", **stamps}
        rows.append(row)
        detail = (record["final"] or {}).get("reward_detail") or {}
        rollouts.append({**row, "response": {"output": responses_output(conversation)},
                         "reward": float((record["final"] or {}).get("reward") or 0.0),
                         "r_success": float(detail.get("r_success") or 0.0), "policy": policy,
                         "termination_reason": (record["final"] or {}).get("termination_reason")})
    metrics = {
        "Number of examples": len(rows),
        "Number of tools": _stats([len(r["responses_create_params"]["tools"]) for r in rows]),
        "Json-dumped number of words (proxy for token count)": _stats(
            [len(json.dumps(r["responses_create_params"], ensure_ascii=False).split()) for r in rows]),
        "Number of turns": _stats([len(r["responses_create_params"]["input"]) for r in rows]),
        "reward": _stats([r["reward"] for r in rollouts]),
        "success rate": round(sum(r["r_success"] for r in rollouts) / len(rollouts), 4),
        "policy": policy, "stamps": stamps,
    }
    return rows, rollouts, metrics


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="data directory (default: the user-cache catalog)")
    parser.add_argument("--policy", default="heuristic", help="built-in policy of the rollouts (default: heuristic)")
    parser.add_argument("--count", type=int, default=5, help="test tasks (default: 5)")
    args = parser.parse_args()
    if args.data is None:
        from shopsimrl.generate.user_cache import ensure_default_catalog

        args.data = ensure_default_catalog()
    rows, rollouts, metrics = build(args.data, args.policy, args.count)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "example.jsonl").write_text(_jsonl(rows), "utf-8")
    (OUT / "example_rollouts.jsonl").write_text(_jsonl(rollouts), "utf-8")
    (OUT / "example_metrics.json").write_text(json.dumps(metrics, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(f"wrote {OUT}: {len(rows)} rows, mean reward {metrics['reward']['Mean']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

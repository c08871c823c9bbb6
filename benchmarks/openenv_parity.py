"""The heuristic through OpenEnv's WebSocket server next to the same policy in-process (needs the openenv extra).

    .venv-openenv/bin/python benchmarks/openenv_parity.py --data data/default --split test [--limit N] [--shopper rule]

``--shopper rule`` compares dialogue episodes (the dialogue heuristic asks the rule shopper through ``ask_user``).

Prints success (r_strict == 1) and mean r_strict for both paths and the number of tasks whose reward differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from live_server import serve
from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel, policy_action
from shopsimrl.agent.policies import make_policy
from shopsimrl.agent.prompt import first_user_message, system_message
from shopsimrl.env import ShopWorld
from shopsimrl.openenv import ShopSimAction, ShopSimClient, create_openenv_app
from shopsimrl.versions import EPISODE_LIMITS


async def over_openenv(url: str, policy, task_id: int, shopper: str | None, limit: int) -> float:
    async with ShopSimClient(base_url=url) as client:
        result = await (client.reset(task_id=task_id, shopper=shopper) if shopper else client.reset(task_id=task_id))
        obs = result.observation
        visible = obs.shopper_opening if shopper else obs.task_instruction
        messages = [{"role": "system", "content": system_message(obs.user_persona or {})},
                    {"role": "user", "content": first_user_message(visible or "", obs.page_text)}]
        for step in range(limit):
            action = policy_action(policy, messages, obs.tools, seed=step)
            call = {"id": f"c{step}", "type": "function", "function": {
                "name": action.name, "arguments": json.dumps(dict(action.arguments), ensure_ascii=False)}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            result = await client.step(ShopSimAction(tool=action.name, arguments=dict(action.arguments)))
            obs = result.observation
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": obs.page_text})
            if result.done:
                return float(result.reward or 0.0)
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/default")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--shopper", choices=("rule",), default=None, help="dialogue episodes (dialogue heuristic)")
    args = parser.parse_args()
    world = ShopWorld.shared(args.data)
    tasks = list(world.catalog.split(args.split))[: args.limit]
    name = "dialogue-heuristic" if args.shopper else "heuristic"
    limit = EPISODE_LIMITS["multi_turn" if args.shopper else "single_turn"]
    config = RuntimeConfig(max_steps=limit, interaction_mode="multi_turn", shopper=args.shopper) if args.shopper \
        else RuntimeConfig()
    runtime = AgentRuntime(BuiltinPolicyModel.named(name, world), InProcessEnvironment(world), config=config)
    local = {t: (asyncio.run(runtime.run(EpisodeJob(task_id=t)))["final"] or {}).get("reward", 0.0) for t in tasks}
    policy = make_policy(name, world)
    with serve(create_openenv_app(world, slots=4)) as url:
        remote = {t: asyncio.run(over_openenv(url, policy, t, args.shopper, limit)) for t in tasks}
    print(f"policy {name}, shopper {args.shopper}")
    for name, rewards in (("in-process", local), ("openenv", remote)):
        success = sum(r == 1.0 for r in rewards.values()) / len(rewards)
        print(f"{name:>10}: tasks {len(rewards)}  success {success:.2%}  mean r_strict {sum(rewards.values()) / len(rewards):.4f}")
    print(f"tasks whose reward differs: {sum(local[t] != remote[t] for t in tasks)}")


if __name__ == "__main__":
    main()

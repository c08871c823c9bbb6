"""Shared checks for dialogue mode (issue 16) in the training adapters' tests: the reference episode through the
agent runtime, the shopper's replies, and the rule that a reply is never a trained token."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from shopsimrl.agent import AgentRuntime, EpisodeJob, InProcessEnvironment, RuntimeConfig
from shopsimrl.agent.builtin_backend import BuiltinPolicyModel
from shopsimrl.dialogue.registry import shopper_registry
from shopsimrl.env import ShopWorld

REPLY_MARK = "顾客回复："


def reference(world: ShopWorld, task: int, policy: str) -> dict[str, Any]:
    """The same dialogue episode through the agent runtime (what ``eval --shopper rule`` plays)."""
    runtime = AgentRuntime(BuiltinPolicyModel.named(policy, world), InProcessEnvironment(world),
                           config=RuntimeConfig(max_steps=40, interaction_mode="multi_turn", shopper="rule"))
    record: dict[str, Any] = asyncio.run(runtime.run(EpisodeJob(task_id=task)))
    return record


def replies(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The shopper's replies in a conversation (``ask_user`` tool results)."""
    return [m["content"].split(REPLY_MARK, 1)[1].split("\n", 1)[0] for m in messages
            if m.get("role") == "tool" and REPLY_MARK in str(m.get("content"))]


def questions(actions: Sequence[str | None]) -> list[str]:
    return [a[len("ask_user["):-1] for a in actions if (a or "").startswith("ask_user[")]


def opening(world: ShopWorld, task: int) -> tuple[str, str, str]:
    """The shopper's opening, the first page and the (withheld) instruction of ``task``."""
    reset = world.new_env(shoppers=shopper_registry()).reset(task, shopper="rule")
    return reset["shopper_opening"], reset["observation"], str(world.catalog.goal(task)["instruction_text"])


def check_split(trained: str, untrained: str, asked: Sequence[str], answered: Sequence[str]) -> None:
    """Questions are trained; every reply is in the untrained text and never in the trained one."""
    assert asked and len(answered) == len(asked)
    assert all(q in trained for q in asked)
    assert all(r and r not in trained and r in untrained for r in answered)
    assert REPLY_MARK not in trained

"""The chat prompt of an episode (docs/contract.md#runtime-prompt): system message, persona line, first user message.

The rules text is the project's own wording of the five reference rules; its identity (version string and the
SHA-256 of its canonical JSON) travels in manifests and traces so that runs with different prompts are never
mixed or compared by accident.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .policy import PERSONA_HEADER, TASK_HEADER

PROMPT_VERSION = "shopsim-shopping-agent-tools-v2"

SYSTEM_PROMPT = """你是一名购物助手，在模拟电商网站中替用户挑选并购买一件商品。你只能通过函数工具与网站交互，请遵守以下规则：
1. 每一轮只调用一个工具（search 或 click），调用之后等待页面返回再决定下一步。
2. 只有当前页面提供 search 工具时才能搜索；其他页面请用 click 浏览、返回或翻页。
3. click 的 value 必须从工具给出的可选值中原样复制，不要改写、翻译或自行拼接。
4. 购买前必须为商品的每一个规格项都选定取值；页面提示仍需选择规格时不要点击购买。
5. 只购买完全符合任务要求（类型、属性、规格、预算）的商品，不要购买只部分匹配的商品。
不要输出可见的思考过程、Thought/Action 格式或 JSON 文本；请在思考阶段完成推理，回答中只包含一次工具调用。"""


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, non-ASCII kept: the form every fingerprint is taken of."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def sha256_json(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def persona_line(persona: Mapping[str, Any]) -> str:
    """The persona as one line of JSON: sorted keys, default separators, non-ASCII kept (docs/contract.md#runtime-prompt)."""
    return json.dumps(persona, ensure_ascii=False, sort_keys=True)


def system_message(
    persona: Mapping[str, Any] | None, skill_block: str | None = None, prompt: str = SYSTEM_PROMPT
) -> str:
    """Rules text, then ``用户个人文档：`` + persona line when the persona is non-empty, then the skill block."""
    sections = [prompt.rstrip()]
    if isinstance(persona, Mapping) and persona:
        sections.append(f"{PERSONA_HEADER}\n{persona_line(persona)}")
    if skill_block:
        sections.append(skill_block)
    return "\n\n".join(sections)


def first_user_message(instruction: str, observation: str) -> str:
    return f"{TASK_HEADER}\n{instruction}\n\n{observation}"


def prompt_identity(prompt: str = SYSTEM_PROMPT) -> dict[str, str]:
    return {"prompt_version": PROMPT_VERSION, "system_prompt_sha256": sha256_json(prompt)}

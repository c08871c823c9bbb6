"""Optional skill banks (docs/contract.md#skills): procedural notes appended to the system message as their own block.

A bank is a JSON file ``{schema_version: "shopsimrl-skillbank-v1", bank_version, metadata, skills: [...]}``;
each skill has an id (``skill_id``, or ``id``), a ``version`` and a ``content``, optionally ``enabled`` and
``task_ids``. Selection never reads the private goal; the selected chunks are recorded in every trace.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..hashing import sha256_hex

SKILLBANK_SCHEMA = "shopsimrl-skillbank-v1"
SKILL_RENDERER_VERSION = "plain-skill-context-v1"
SKILL_HEADER = "[可选策略提示]"
SKILL_NOTE = "这些提示只提供通用策略；仍需依据当前任务和页面独立核验。"


@dataclass(frozen=True)
class Skill:
    skill_id: str
    version: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True
    task_ids: frozenset[int] | None = None

    @property
    def content_sha256(self) -> str:
        return sha256_hex(self.content.encode("utf-8"))

    def record(self) -> dict[str, Any]:
        """The form written into traces (``selected_skills``)."""
        return {
            "skill_id": self.skill_id, "content": self.content, "version": self.version,
            "metadata": self.metadata, "content_sha256": self.content_sha256,
        }


def _skill(raw: Any, index: int) -> Skill:
    if not isinstance(raw, dict):
        raise DataError(f"skill #{index} is not an object", code="skill_bank")
    skill_id = raw.get("skill_id", raw.get("id"))
    content, version = raw.get("content"), raw.get("version", "1")
    if not isinstance(skill_id, str) or not skill_id.strip():
        raise DataError(f"skill #{index} has no string skill_id/id", code="skill_bank")
    if not isinstance(content, str) or not content.strip():
        raise DataError(f"skill {skill_id!r} has no content", code="skill_bank")
    if not isinstance(version, (str, int)) or isinstance(version, bool):
        raise DataError(f"skill {skill_id!r}: version must be a string", code="skill_bank")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DataError(f"skill {skill_id!r}: metadata must be an object", code="skill_bank")
    task_ids = raw.get("task_ids")
    if task_ids is not None and (
        not isinstance(task_ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in task_ids)
    ):
        raise DataError(f"skill {skill_id!r}: task_ids must be a list of integers", code="skill_bank")
    return Skill(
        skill_id=skill_id, version=str(version), content=content, metadata=metadata,
        enabled=bool(raw.get("enabled", True)), task_ids=frozenset(task_ids) if task_ids is not None else None,
    )


@dataclass(frozen=True)
class SkillBank:
    skills: tuple[Skill, ...]
    bank_version: str
    path: str
    sha256: str

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SkillBank:
        file = Path(path)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise DataError(f"cannot read skill bank {file}: {exc}", code="skill_bank") from exc
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise DataError(f"skill bank {file} is not JSON: {exc}", code="skill_bank") from exc
        if not isinstance(payload, dict):
            raise DataError(
                f"skill bank {file}: expected an object {{\"schema_version\": {SKILLBANK_SCHEMA!r}, \"skills\": [...]}}", code="skill_bank")
        if "schema_version" not in payload:  # an unversioned file may be any format: refuse rather than guess
            raise DataError(f"skill bank {file}: schema_version is missing (expected {SKILLBANK_SCHEMA!r})", code="skill_bank")
        if payload["schema_version"] != SKILLBANK_SCHEMA:
            raise DataError(f"skill bank {file}: schema_version must be {SKILLBANK_SCHEMA!r}", code="skill_bank")
        raw_skills = payload.get("skills")
        if not isinstance(raw_skills, list):
            raise DataError(f"skill bank {file}: 'skills' must be a list", code="skill_bank")
        skills = tuple(_skill(raw, i) for i, raw in enumerate(raw_skills))
        ids = [s.skill_id for s in skills]
        if len(set(ids)) != len(ids):
            raise DataError(f"skill bank {file}: duplicate skill ids", code="skill_bank")
        return cls(skills, str(payload.get("bank_version", "")), str(file), sha256_hex(data))

    def select(self, task_id: int | None) -> list[Skill]:
        """Enabled skills in file order; a skill with ``task_ids`` applies only to those tasks."""
        return [
            s for s in self.skills
            if s.enabled and (s.task_ids is None or (task_id is not None and task_id in s.task_ids))
        ]

    def identity(self) -> dict[str, Any]:
        return {
            "provider": "json-skillbank", "path": self.path, "bank_version": self.bank_version,
            "sha256": self.sha256, "renderer_version": SKILL_RENDERER_VERSION,
            "skill_ids": [s.skill_id for s in self.skills if s.enabled],
        }


NO_SKILLS = {"provider": "none", "renderer_version": SKILL_RENDERER_VERSION}


def render_skills(skills: list[Skill]) -> str | None:
    """The skill block (docs/contract.md#skills), or None when nothing was selected."""
    if not skills:
        return None
    lines = [SKILL_HEADER, SKILL_NOTE]
    for s in skills:
        lines.append(f"<skill id={json.dumps(s.skill_id, ensure_ascii=False)} "
                     f"version={json.dumps(s.version, ensure_ascii=False)}>")
        lines.append(s.content.strip())
        lines.append("</skill>")
    return "\n".join(lines)

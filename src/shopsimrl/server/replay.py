"""Read-only access to experiment runs (docs/contract.md#run-directories) for the replay UI, confined to one runs directory.

A run is a direct sub-directory of the runs root holding at least one of ``manifest.json``, ``summary.json``
and ``traces.jsonl``. Run names are checked against a strict pattern and the resolved path must sit directly
inside the root (a symlink pointing elsewhere is refused), so no request can read outside it. Episodes are
looked up by id in the parsed trace index, never by path. The last trace line for an ``episode_id`` wins;
blank, broken or foreign lines are counted, not fatal.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..bounded_cache import TRACE_FILE_BYTES
from ..contract import ASK_USER_TOOL
from ..env.fuzzy import token_set_ratio
from ..errors import RequestError

ARTIFACTS = ("manifest.json", "summary.json", "traces.jsonl")
EPISODE_SCHEMA = "shopsimrl-episode-v4"
RUN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_RUN_NAME = re.compile(RUN_NAME_PATTERN)
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024
MAX_CACHED_TRACE_BYTES = TRACE_FILE_BYTES  # parsed traces kept, counted by file size (~2.5x that in memory)


@dataclass
class TraceIndex:
    episodes: dict[str, dict[str, Any]]
    records: int
    duplicate_records: int
    invalid_lines: int


def _mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).isoformat(timespec="seconds")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _sort_key(record: dict[str, Any]) -> tuple[Any, ...]:
    job = _dict(record.get("job"))
    task, sample = job.get("task_id"), job.get("sample_id")
    return (
        not isinstance(task, int), task if isinstance(task, int) else 0,
        sample if isinstance(sample, int) else 0, str(record.get("episode_id")),
    )


def _ask_question(step: dict[str, Any]) -> str | None:
    """The question of an ``ask_user`` step, from its canonical action (``ask_user[QUESTION]``)."""
    action = step.get("action")
    if not isinstance(action, str):
        return None
    tool, bracket, rest = action.partition("[")
    if bracket and tool.casefold() == ASK_USER_TOOL and rest.endswith("]"):  # the env reads tool names caselessly
        return rest[:-1]  # an empty question (refused by the environment) is still a turn of the dialogue
    return None


def dialogue_view(record: dict[str, Any]) -> dict[str, Any] | None:
    """A dialogue episode's conversation for the replay view: the shopper, its opening and every question with
    its reply in step order (None for an episode without a shopper).

    Read from the trace's ``dialogue`` block (``turns``, each with its ``step_index``) when it has one, else from
    the steps themselves (each step's ``dialogue`` entry, or an ``ask_user[...]`` action and the environment's
    ``shopper_reply``), so a failed episode, which has no block, still shows what was said. The private
    ``transcript`` (matched slots, noise) is never part of it.
    """
    block, reset = _dict(record.get("dialogue")), _dict(record.get("reset"))
    shopper = block.get("shopper") or reset.get("shopper")
    if not block and not shopper:
        return None
    turns: list[dict[str, Any]] = []
    if isinstance(block.get("turns"), list):
        for turn in block["turns"]:
            turn = _dict(turn)
            turns.append({"step_index": turn.get("step_index"), "question": turn.get("question"),
                          "reply": turn.get("reply"), "valid": turn.get("valid") is True})
    else:
        for step in _list(record.get("steps")):
            step = _dict(step)
            entry = _dict(step.get("dialogue"))
            question = entry.get("question") if entry else _ask_question(step)
            if question is None:
                continue
            environment = _dict(step.get("environment"))
            feedback = _dict(environment.get("action_feedback"))
            reply = entry.get("reply") if entry else environment.get("shopper_reply")
            valid = entry.get("valid") if entry else feedback.get("valid")
            turns.append({"step_index": step.get("step_index"), "question": question, "reply": reply,
                          "valid": valid is True})
    return {"shopper": shopper, "shopper_version": block.get("shopper_version") or reset.get("shopper_version"),
            "opening": block.get("opening") or reset.get("shopper_opening"), "turns": turns}


def episode_summary(record: dict[str, Any]) -> dict[str, Any]:
    """One row of a run's episode list."""
    job, final = _dict(record.get("job")), _dict(record.get("final"))
    detail = _dict(final.get("reward_detail"))
    steps = [step for step in _list(record.get("steps")) if isinstance(step, dict)]
    invalid = sum(1 for s in steps if _dict(_dict(s.get("environment")).get("action_feedback")).get("valid") is False)
    error = record.get("error")
    dialogue = dialogue_view(record)
    return {
        "episode_id": record.get("episode_id"),
        "task_id": job.get("task_id"),
        "sample_id": job.get("sample_id"),
        "status": record.get("status"),
        "done": final.get("done") is True,
        "reward": _number(final.get("reward")),
        "success": _number(detail.get("r_success")),
        "termination_reason": final.get("termination_reason"),
        "steps": len(steps),
        "environment_actions": sum(1 for s in steps if s.get("environment") is not None),
        "invalid_actions": invalid,
        "protocol_errors": sum(1 for s in steps if s.get("protocol_error")),
        "policy_failures": sum(1 for s in steps if s.get("policy_failure")),
        "duration_ms": _number(record.get("duration_ms")),
        "instruction": _dict(record.get("reset")).get("task_instruction"),
        "task_mode": _dict(record.get("reset")).get("task_mode"),
        "schema_version": record.get("schema_version"),
        "shopper": dialogue["shopper"] if dialogue else None,
        "questions": len(dialogue["turns"]) if dialogue else None,
        "error": error if isinstance(error, (str, type(None))) else _dict(error).get("type", str(error)),
    }


def computed_summary(index: TraceIndex, manifest: dict[str, Any] | None) -> dict[str, Any]:
    """Headline figures recomputed from the traces (docs/contract.md#summary semantics, a subset)."""
    rows = [episode_summary(record) for record in index.episodes.values()]
    jobs = _list(_dict(_dict(manifest).get("plan")).get("jobs"))
    requested = len(jobs) if jobs else len(rows)
    completed = [r for r in rows if r["status"] == "completed" and r["done"] and r["schema_version"] == EPISODE_SCHEMA]
    rewards = [r["reward"] for r in completed if r["reward"] is not None]
    successes = [r["success"] for r in completed if r["success"] is not None]
    actions = sum(r["environment_actions"] for r in rows)
    invalid = sum(r["invalid_actions"] for r in rows)
    return {
        "counts": {
            "requested": requested, "recorded": len(rows), "pending": max(0, requested - len(rows)),
            "completed": len(completed), "failed": sum(1 for r in rows if r["status"] == "failed"),
            "scored": len(rewards),
        },
        "primary": {"reward_mean": _mean(rewards), "success_rate": _mean(successes)},
        "behavior": {
            "steps_mean": _mean([float(r["steps"]) for r in rows]),
            "environment_actions": actions, "invalid_actions": invalid,
            "invalid_action_rate": invalid / actions if actions else None,
            "protocol_errors": sum(r["protocol_errors"] for r in rows),
            "policy_failures": sum(r["policy_failures"] for r in rows),
        },
        "termination_reasons": dict(sorted(Counter(str(r["termination_reason"]) for r in rows).items())),
        "statuses": dict(sorted(Counter(str(r["status"]) for r in rows).items())),
    }


def _attribute_match(goal_attrs: list[str], bought_attrs: list[str]) -> dict[str, list[str]]:
    def hit(want: str) -> bool:
        return any(want in have or token_set_ratio(want, have) > 85 for have in bought_attrs)

    matched = [a for a in goal_attrs if hit(a)]
    extra = [b for b in bought_attrs if not any(a in b or token_set_ratio(a, b) > 85 for a in goal_attrs)]
    return {"matched": matched, "missing": [a for a in goal_attrs if a not in matched], "extra": extra}


def outcome_comparison(record: dict[str, Any]) -> dict[str, Any]:
    """Target (``final.goal``) beside the purchase (``final.purchase``): ASIN, attributes, options, price."""
    final = _dict(record.get("final"))
    goal, purchase = _dict(final.get("goal")), _dict(final.get("purchase"))
    detail = _dict(final.get("reward_detail"))
    goal_attrs = [str(a) for a in _list(goal.get("attributes"))]
    bought_attrs = [str(a) for a in _list(purchase.get("attributes"))]
    gold_options = [str(o) for o in _list(goal.get("goal_options"))]
    chosen = {str(k): str(v) for k, v in _dict(purchase.get("options")).items()}
    chosen_values = list(chosen.values())
    target = None
    if goal.get("asin"):
        target = {key: goal.get(key) for key in ("asin", "name", "category", "attributes", "goal_options", "price_upper")}
    return {
        "target": target,
        "purchase": ({key: purchase.get(key) for key in ("asin", "name", "category", "attributes", "options", "price")}
                     if purchase else None),
        "asin_match": bool(goal.get("asin")) and goal.get("asin") == purchase.get("asin"),
        "attributes": _attribute_match(goal_attrs, bought_attrs) if purchase else None,
        "options": {
            "gold": gold_options, "purchased": chosen,
            "matched": [o for o in gold_options if o in chosen_values],
            "missing": [o for o in gold_options if o not in chosen_values],
        },
        "price": {"upper": goal.get("price_upper"), "paid": purchase.get("price"),
                  "verifiable": detail.get("price_verifiable")},
        "reward_detail": detail,
    }


class RunsStore:
    """The runs directory, read-only. Parsed trace files are cached by (size, mtime), least recently used
    first out, up to ``max_cached_bytes`` of trace files (a larger file is parsed on each request, not kept)."""

    def __init__(self, root: str | Path, *, max_cached_bytes: int = MAX_CACHED_TRACE_BYTES) -> None:
        self.root = Path(root).resolve()
        #: The root as the API shows it: as the user named it when relative, else only its last part (an absolute
        #: path tells a page about the machine's layout and the user's name).
        self.shown_root = str(root) if not Path(root).is_absolute() else Path(root).name
        self.max_cached_bytes = max_cached_bytes
        self._cache: OrderedDict[Path, tuple[tuple[int, int], TraceIndex]] = OrderedDict()

    @property
    def cached_bytes(self) -> int:
        return sum(key[0] for key, _ in self._cache.values())

    def _remember(self, path: Path, key: tuple[int, int], index: TraceIndex) -> None:
        self._cache.pop(path, None)
        if key[0] > self.max_cached_bytes:
            return
        self._cache[path] = (key, index)
        while self.cached_bytes > self.max_cached_bytes:
            self._cache.popitem(last=False)

    @staticmethod
    def artifact(run: Path, name: str) -> Path | None:
        """``run/name`` if it is a regular file whose real path is inside the run; a symlink that leads
        anywhere else (``manifest.json -> /etc/passwd``) counts as absent, so nothing outside is read."""
        path = run / name
        if not path.is_file():
            return None
        try:
            real = path.resolve(strict=True)
            linked = real.stat().st_nlink > 1  # a hard link may be another file of anywhere on the disk
        except (OSError, RuntimeError):
            return None
        return path if real.parent == run.resolve() and not linked else None

    # --------------------------------------------------------------- paths
    def run_dir(self, name: str) -> Path:
        if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
            raise RequestError(f"invalid run name {name!r}: letters, digits, '.', '_' and '-' only", code="invalid_replay_request")
        path = (self.root / name).resolve()
        if path.parent != self.root:
            raise RequestError(f"run {name!r} resolves outside the runs directory", code="invalid_replay_request")
        if not path.is_dir() or not any(self.artifact(path, a) for a in ARTIFACTS):
            raise RequestError(f"no run named {name!r} in the runs directory", code="replay_not_found")
        return path

    # --------------------------------------------------------------- reading
    def list_runs(self) -> dict[str, Any]:
        runs = []
        if self.root.is_dir():
            for path in self.root.iterdir():
                if not _RUN_NAME.fullmatch(path.name) or not path.is_dir() or path.resolve().parent != self.root:
                    continue
                artifacts = {a: self.artifact(path.resolve(), a) is not None for a in ARTIFACTS}
                if any(artifacts.values()):
                    runs.append({"name": path.name, "modified_at": _mtime(path), "artifacts": artifacts})
        runs.sort(key=lambda run: (run["modified_at"], run["name"]), reverse=True)
        return {"runs_root": self.shown_root, "runs": runs}

    def _json(self, run: Path, name: str) -> Any:
        path = self.artifact(run, name)
        if path is None:
            return None
        if path.stat().st_size > MAX_ARTIFACT_BYTES:
            raise RequestError(f"{path.name} is too large to show", code="invalid_replay_request")
        try:
            return json.loads(path.read_text("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(f"{path.name} is not valid JSON: {exc}", code="invalid_replay_request") from exc

    def traces(self, run: Path) -> TraceIndex:
        path = self.artifact(run, "traces.jsonl")
        if path is None:
            return TraceIndex({}, 0, 0, 0)
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            self._cache.move_to_end(path)
            return cached[1]
        if stat.st_size > MAX_ARTIFACT_BYTES:
            raise RequestError("traces.jsonl is too large to show", code="invalid_replay_request")
        episodes: dict[str, dict[str, Any]] = {}
        records = invalid = 0
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    invalid += 1
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("episode_id"), str):
                    invalid += 1
                    continue
                records += 1
                episodes.pop(record["episode_id"], None)
                episodes[record["episode_id"]] = record
        ordered = dict(sorted(episodes.items(), key=lambda item: _sort_key(item[1])))
        index = TraceIndex(ordered, records, records - len(ordered), invalid)
        self._remember(path, key, index)
        return index

    def run(self, name: str) -> dict[str, Any]:
        path = self.run_dir(name)
        manifest, summary = self._json(path, "manifest.json"), self._json(path, "summary.json")
        index = self.traces(path)
        artifacts: dict[str, dict[str, Any]] = {}
        for artifact in ARTIFACTS:
            file = self.artifact(path, artifact)
            artifacts[artifact] = ({"present": True, "bytes": file.stat().st_size, "modified_at": _mtime(file)}
                                   if file is not None else {"present": False})
            if file is None and (path / artifact).is_symlink():
                artifacts[artifact]["refused"] = "a link that leads outside the run directory"
            elif file is None and (path / artifact).is_file():
                artifacts[artifact]["refused"] = "a hard link (the file has other names)"
        return {
            "run": {"name": name},
            "artifacts": artifacts,
            "manifest": manifest,
            "artifact_summary": summary,
            "computed_summary": computed_summary(index, manifest if isinstance(manifest, dict) else None),
            "trace_index": {"records": index.records, "unique_episodes": len(index.episodes),
                            "duplicate_records": index.duplicate_records, "invalid_lines": index.invalid_lines},
            "episodes": [episode_summary(record) for record in index.episodes.values()],
        }

    def episode(self, name: str, episode_id: str) -> dict[str, Any]:
        index = self.traces(self.run_dir(name))
        record = index.episodes.get(episode_id)
        if record is None:
            raise RequestError(f"run {name!r} has no episode {episode_id!r}", code="replay_not_found")
        return {"summary": episode_summary(record), "episode": record, "outcome_comparison": outcome_comparison(record),
                "dialogue": dialogue_view(record)}

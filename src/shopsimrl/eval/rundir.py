"""A run directory (docs/contract.md#run-directories): ``manifest.json``, append-only ``traces.jsonl``, ``summary.json``.

Every finished attempt is one JSON line, written whole and flushed at once (fsync'd at most once a second and
on close), so killing the evaluator loses at most the episodes still in flight; the last line of an
``episode_id`` wins and a broken line (a line cut by a crash) is skipped when reading, and its line number
is kept so that a resume can say so. A directory holds one plan: a manifest with another fingerprint, or one
whose plan is missing, is refused before anything is written, and so is a non-empty directory without a manifest
of its own (its traces would be adopted as this run's results and its files overwritten): a manifest of its own is
a regular file, never a symbolic link (dangling or to another run's manifest).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..agent.runtime import utc_now
from ..dialogue.reply_cache import CACHE_DIRNAME
from ..errors import ConfigError
from ..jsonfile import read_json_file
from ..versions import TRACE_SCHEMA_VERSION
from .plan import MANIFEST_SCHEMA, EvalPlan

MANIFEST_FILE = "manifest.json"
TRACES_FILE = "traces.jsonl"
SUMMARY_FILE = "summary.json"
FSYNC_INTERVAL_S = 1.0
#: What a run writes into its directory (``eval --force`` removes these, and nothing else).
RUN_ARTIFACTS = (MANIFEST_FILE, TRACES_FILE, SUMMARY_FILE, "report.md", "report.html", "comparison.json")
RUN_FOLDERS = ("report_figures",)
#: Caches a run keeps beside its results, keyed by request: a new run reads them as a cache, never as its results.
RUN_CACHES = (CACHE_DIRNAME,)


def trace_line(record: dict[str, Any]) -> str:
    """One compact JSON line (keys in insertion order, non-ASCII kept), encoded with orjson for speed.

    Records orjson cannot encode (integers beyond 64 bits, non-string keys) go through ``json.dumps``; the
    same record always gives the same line. NaN and Infinity, which no record should hold, are written as
    ``null`` (strict JSON) instead of Python's non-standard tokens. A string with a lone surrogate (a model
    can send a ``\\ud800`` escape) cannot be UTF-8: such a record is written with ASCII escapes.
    """
    try:
        return orjson.dumps(record).decode("utf-8") + "\n"
    except TypeError:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(record, separators=(",", ":"))
        return text + "\n"


def write_json_atomic(path: Path, payload: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(tmp, path)


def is_completed(record: Any) -> bool:
    """Completed = right schema, ``status == "completed"`` and a terminal ``final`` (docs/contract.md#summary)."""
    return (
        isinstance(record, dict) and record.get("schema_version") == TRACE_SCHEMA_VERSION
        and record.get("status") == "completed" and isinstance(record.get("final"), dict)
        and record["final"].get("done") is True
    )


def iter_trace_lines(path: Path, unparseable: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """Every parseable episode record of a traces file, in file order.

    Blank lines are skipped; so are lines that are not an episode record (bad JSON, a line cut by a crash,
    no ``episode_id``), whose 1-based numbers are appended to ``unparseable`` when given.
    """
    if not path.is_file():
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):
                record = None
            if isinstance(record, dict) and isinstance(record.get("episode_id"), str):
                yield record
            elif unparseable is not None:
                unparseable.append(number)


def latest_records(path: Path, unparseable: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """The last record of each episode id (``unparseable``: see :func:`iter_trace_lines`)."""
    latest: dict[str, dict[str, Any]] = {}
    for record in iter_trace_lines(path, unparseable):
        latest[record["episode_id"]] = record
    return latest


def describe_unparseable(path: Path, lines: list[int], *, shown: int = 20) -> str:
    """One line saying which lines of a traces file were skipped (their episodes run again)."""
    numbers = ", ".join(map(str, lines[:shown])) + (f", … ({len(lines) - shown} more)" if len(lines) > shown else "")
    return (f"{path}: {len(lines)} line(s) could not be parsed as episode records and were skipped "
            f"(line {numbers}); their episodes count as not done")


class RunDir:
    """One run directory; ``open_for(plan)`` creates it or checks that it holds the same plan."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._handle: Any = None
        self._last_sync = 0.0
        self.unparseable_lines: list[int] = []  # of traces.jsonl, as of the last records() call

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def traces_path(self) -> Path:
        return self.root / TRACES_FILE

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY_FILE

    def _has_manifest(self) -> bool:
        """Whether the directory has a manifest of its own. A symbolic link named ``manifest.json`` (dangling, or to
        another run's manifest of the same plan) is refused, so that no directory is adopted on another's manifest."""
        path = self.manifest_path
        if path.is_symlink():
            raise ConfigError(f"{path} is a symbolic link (to {os.readlink(path)}), not a manifest of its own: eval "
                              "adopts a run directory only on the manifest it wrote there; use a new --out "
                              "directory (or --force to start over)", code="run_dir")
        return path.exists()  # a folder or a device: read_json_file refuses it with what it is

    def manifest(self) -> dict[str, Any]:
        """The checked manifest: a regular file, the right schema and a plan object with its job list."""
        if not self._has_manifest():
            raise ConfigError(f"{self.root} is not a run directory (no {MANIFEST_FILE})", code="run_dir")
        manifest = read_json_file(self.manifest_path, error=ConfigError, code="run_dir", expect=None)
        if not isinstance(manifest, dict) or manifest.get("schema_version") != MANIFEST_SCHEMA:
            raise ConfigError(f"{self.manifest_path} is not a {MANIFEST_SCHEMA} manifest", code="run_dir")
        plan = manifest.get("plan")
        if not isinstance(plan, dict) or not isinstance(plan.get("jobs"), list):
            raise ConfigError(f"{self.manifest_path} has no plan: the run directory is damaged; use a new --out "
                              "directory (or --force to start over)", code="run_dir")
        return manifest

    def plan(self) -> EvalPlan:
        return EvalPlan(self.manifest()["plan"])

    def open_for(self, plan: EvalPlan) -> bool:
        """Create the manifest, or check the existing one; True when the directory already had this plan.

        A directory without a manifest must be empty (or absent): anything in it belongs to someone else.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        has_manifest = self._has_manifest()
        if not has_manifest:
            foreign = sorted(entry.name for entry in self.root.iterdir() if entry.name not in RUN_CACHES)
            if foreign:
                shown = ", ".join(foreign[:5]) + (f", … ({len(foreign) - 5} more)" if len(foreign) > 5 else "")
                removable = all(name in RUN_ARTIFACTS or name in RUN_FOLDERS for name in foreign)
                raise ConfigError(
                    f"{self.root} is not empty ({shown}) and has no {MANIFEST_FILE} of its own: eval will not adopt "
                    "its files as this run's results nor overwrite them; use a new --out directory"
                    + (" (or --force to replace them)" if removable else ""), code="run_dir")
        if has_manifest:
            existing = self.manifest()
            if existing.get("plan_fingerprint") != plan.fingerprint:
                raise ConfigError(
                    f"{self.root} holds another plan (fingerprint {str(existing.get('plan_fingerprint'))[:12]}…, "
                    f"this one {plan.fingerprint[:12]}…): use a new --out directory"
                    + _plan_diff(existing.get("plan"), plan.plan), code="run_dir"
                )
            return True
        write_json_atomic(self.manifest_path, {
            "schema_version": MANIFEST_SCHEMA, "created_at": utc_now(),
            "plan_fingerprint": plan.fingerprint, "plan": plan.plan,
        })
        return False

    def clear(self) -> None:
        """Remove this directory's run artifacts (``RUN_ARTIFACTS``, ``RUN_FOLDERS``) and nothing else."""
        import shutil

        for name in RUN_ARTIFACTS:
            (self.root / name).unlink(missing_ok=True)
        for name in RUN_FOLDERS:
            shutil.rmtree(self.root / name, ignore_errors=True)

    def records(self) -> dict[str, dict[str, Any]]:
        """The latest record of each episode; the numbers of skipped lines go to ``unparseable_lines``."""
        self.unparseable_lines = []
        return latest_records(self.traces_path, self.unparseable_lines)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line, flushed; fsync'd at most every second (and on close)."""
        line = trace_line(record)
        with self._lock:
            if self._handle is None:
                self._handle = self.traces_path.open("a", encoding="utf-8")
                if self._handle.tell() > 0:
                    self._repair_tail()
            self._handle.write(line)
            self._handle.flush()
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_INTERVAL_S:
                os.fsync(self._handle.fileno())
                self._last_sync = now

    def _repair_tail(self) -> None:
        """A crash can leave a line without its newline: end it so the next record starts on its own line."""
        with self.traces_path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
        if last != b"\n":
            self._handle.write("\n")

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.flush()
                os.fsync(self._handle.fileno())
                self._handle.close()
                self._handle = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plan_diff(old: Any, new: Any) -> str:
    if not isinstance(old, dict):
        return ""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return f" (differs in: {', '.join(keys)})" if keys else ""

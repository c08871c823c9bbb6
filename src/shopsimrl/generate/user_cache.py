"""The default catalog in a per-user cache directory, built on first use (no setup step after ``pip install``).

Commands that need a catalog and were given no ``--data`` open this one. Its place follows the XDG base
directory convention: ``$SHOPSIMRL_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/shopsimrl``, else
``~/.cache/shopsimrl``; under it, one directory per generator version and seed, so a new generator builds a
new catalog beside the old one instead of opening a stale one. An exclusive file lock serialises the build:
when two processes start at once, one builds and the other waits, then opens the finished directory. A
completion marker, written last, is what makes a directory usable; a build killed halfway is resumed by the
next command (generation and preparation each skip what is already current).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..catalog.archive import atomic_write_bytes, dump_json_file_bytes
from ..catalog.store import check_versions, read_manifest
from .default import build_default_catalog
from .generator import DEFAULT_SEED, GENERATOR_VERSION
from .layout import GeneratorConfig

CACHE_ENV = "SHOPSIMRL_CACHE_DIR"
COMPLETE_FILE = ".default-catalog-complete.json"


def cache_root() -> Path:
    """``$SHOPSIMRL_CACHE_DIR``, else ``$XDG_CACHE_HOME/shopsimrl``, else ``~/.cache/shopsimrl``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "shopsimrl"


def _key(seed: int, config: GeneratorConfig) -> str:
    """Directory name: generator version and seed (plus a config digest when it is not the default)."""
    version = re.sub(r"[^A-Za-z0-9._-]+", "_", GENERATOR_VERSION.removeprefix("shopsimrl-catalog-"))
    name = f"default-{version}-seed{seed}"
    if config != GeneratorConfig():
        digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()[:12]
        name += f"-config{digest}"
    return name


def default_catalog_dir(seed: int = DEFAULT_SEED, config: GeneratorConfig | None = None) -> Path:
    """Where the default catalog of this generator version lives (built or not)."""
    return cache_root() / "catalogs" / _key(seed, config or GeneratorConfig())


def _marker(seed: int, config: GeneratorConfig) -> dict[str, Any]:
    return {"generator_version": GENERATOR_VERSION, "seed": seed, "config": asdict(config)}


def is_complete(directory: Path, seed: int = DEFAULT_SEED, config: GeneratorConfig | None = None) -> bool:
    """True when ``directory`` holds a finished build of this generator version that this version can open."""
    try:
        marker = json.loads((directory / COMPLETE_FILE).read_text("utf-8"))
        check_versions(directory, read_manifest(directory))
    except (OSError, ValueError):  # DataError is a ValueError
        return False
    return bool(marker == _marker(seed, config or GeneratorConfig()))


@contextmanager
def _locked(path: Path, waiting: Callable[[], None]) -> Iterator[None]:
    """An exclusive lock on ``path``, released when the process dies (a killed build never blocks the next);
    ``waiting()`` is called first when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        if sys.platform == "win32":  # msvcrt's blocking lock of one byte retries ~10 s, then raises: loop
            import msvcrt

            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    waiting()
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waiting()
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class BuildEvents:
    """How a first-use build reports itself: ``stage(message)``, ``generated(n)`` (n more products written),
    ``waiting()`` (another process holds the lock)."""

    stage: Callable[[str], None] = lambda message: None
    generated: Callable[[int], None] = lambda n: None
    waiting: Callable[[], None] = lambda: None


def ensure_default_catalog(
    *, seed: int = DEFAULT_SEED, config: GeneratorConfig | None = None, events: BuildEvents | None = None,
) -> Path:
    """The default catalog's prepared directory, built into the cache on first use; safe under concurrency."""
    config = config or GeneratorConfig()
    events = events or BuildEvents()
    directory = default_catalog_dir(seed, config)
    if is_complete(directory, seed, config):
        return directory
    with _locked(directory.parent / f"{directory.name}.lock", events.waiting):
        if is_complete(directory, seed, config):  # another process finished it while we waited
            return directory
        (directory / COMPLETE_FILE).unlink(missing_ok=True)
        build_default_catalog(directory, seed=seed, config=config, force=True, progress=events.stage,
                              generated=events.generated)
        atomic_write_bytes(directory / COMPLETE_FILE, dump_json_file_bytes(_marker(seed, config)))
    return directory

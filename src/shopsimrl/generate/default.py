"""``shopsimrl data build-default``: generate the default catalog and prepare it, cached.

The generated archive lives in ``DIR/source/`` with its manifest; ``DIR`` itself is a normal prepared data
directory. A second call with the same seed and generator version regenerates nothing and prepares nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..catalog.archive import file_sha256
from ..catalog.prepare import PrepareOptions, prepare_dataset
from ..errors import DataError
from .generator import DEFAULT_SEED, GENERATOR_VERSION
from .layout import GeneratorConfig
from .writer import manifest_path_for, vocabulary_sha256, write_catalog

SOURCE_DIR = "source"
ARCHIVE_NAME = "default_catalog.json.gz"
DEFAULT_DATA_DIR = "data/default"


def _archive_is_current(archive: Path, seed: int, config: GeneratorConfig) -> bool:
    manifest_path = manifest_path_for(archive)
    if not archive.is_file() or not manifest_path.is_file():
        return False
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except ValueError:
        return False
    return bool(
        manifest.get("generator_version") == GENERATOR_VERSION
        and manifest.get("seed") == seed
        and manifest.get("config") == asdict(config)
        and manifest.get("vocabulary_sha256") == vocabulary_sha256()
        and manifest.get("archive_sha256") == file_sha256(archive)
    )


def build_default_catalog(
    out: str | os.PathLike[str] = DEFAULT_DATA_DIR,
    *,
    seed: int = DEFAULT_SEED,
    config: GeneratorConfig | None = None,
    options: PrepareOptions | None = None,
    force: bool = False,
    regenerate: bool = False,
    progress: Callable[[str], None] | None = None,
    generated: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Generate (if needed) and prepare (if needed) the default catalog into ``out``; returns the manifest.

    ``force`` builds over a directory holding other data; ``regenerate`` writes the archive again even when its
    manifest says it is current (a changed generator whose version was not bumped: the manifest cannot tell).
    ``progress`` hears each stage; ``generated(n)``: ``n`` more products were written to the archive.
    """
    say = progress or (lambda message: None)
    config = config or GeneratorConfig()
    out_dir = Path(out)
    if (
        out_dir.is_dir()
        and any(out_dir.iterdir())
        and not (out_dir / SOURCE_DIR).is_dir()
        and not force
    ):
        raise DataError(
            f"{out_dir} already holds data that was not built by build-default; choose another --out or pass --force", code="dataset_build"
        )
    archive = out_dir / SOURCE_DIR / ARCHIVE_NAME
    if not regenerate and _archive_is_current(archive, seed, config):
        say(f"generated archive {archive} is current (seed {seed}, {GENERATOR_VERSION})")
    else:
        say(f"generating {config.products} products (seed {seed}, {GENERATOR_VERSION})")
        archive.parent.mkdir(parents=True, exist_ok=True)
        write_catalog(archive, seed, config, progress=generated)
    # The guard above made sure the directory is ours (or the user forced it), so prepare may rebuild it;
    # prepare itself does nothing when its outputs already match this archive and these options.
    return prepare_dataset(archive, out_dir, options=options, force=True, progress=say)

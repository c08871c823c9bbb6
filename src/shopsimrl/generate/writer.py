"""Writing the catalog: the streamed, deterministic archive file, its counts and its manifest."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..catalog.archive import atomic_write_bytes, dump_json_file_bytes
from .generator import DEFAULT_SEED, GENERATOR_VERSION, CatalogStream, GeneratedCatalog, TaskAudit
from .layout import GeneratorConfig
from .vocabulary import Leaf

MANIFEST_SUFFIX = ".manifest.json"


def _gzip(data: bytes) -> bytes:
    """Gzip with mtime 0 and no file name, so equal data gives equal bytes (level 6: fast enough for 60 s)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=6) as handle:
        handle.write(data)
    return buffer.getvalue()


def manifest_path_for(path: str | os.PathLike[str]) -> Path:
    """The manifest sits next to the archive: ``<archive path>.manifest.json``."""
    target = Path(path)
    return target.with_name(target.name + MANIFEST_SUFFIX)


def vocabulary_sha256() -> str:
    """SHA-256 over the vocabulary data files (a changed vocabulary means a different catalog)."""
    from importlib import resources

    digest = hashlib.sha256()
    folder = resources.files(__package__).joinpath("vocab")
    for name in sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".json")):
        digest.update(name.encode())
        digest.update(folder.joinpath(name).read_bytes())
    return digest.hexdigest()


class _Counts:
    """The manifest's counts, accumulated one audit at a time (so a streamed catalog need not be held)."""

    def __init__(self) -> None:
        self.raw = self.two_axis = self.persona = self.standard = 0
        self.budget_kinds: Counter[str] = Counter()
        self.persona_budget_kinds: Counter[str] = Counter()
        self.undecidable = 0

    def add(self, audit: TaskAudit) -> None:
        self.raw += 1
        self.two_axis += audit.two_axis
        self.persona += audit.persona
        self.standard += not audit.persona and not audit.two_axis
        if not audit.two_axis:
            self.budget_kinds[audit.budget_kind] += 1
        if audit.persona:
            self.persona_budget_kinds[audit.budget_kind] += 1
            self.undecidable += bool(audit.problems)

    def statistics(self, leaves: list[Leaf], leaf_sizes: dict[str, int], user_task_counts: dict[str, int]) -> dict[str, Any]:
        sizes = list(leaf_sizes.values())
        group_sizes = sorted(user_task_counts.values(), reverse=True)
        return {
            "raw_products": self.raw,
            "two_axis_products": self.two_axis,
            "kept_products": self.raw - self.two_axis,
            "persona_tasks": self.persona,
            "standard_tasks": self.standard,
            "domains": len({leaf.domain: None for leaf in leaves}),
            "leaf_categories": len(leaves),
            "leaf_size_min": min(sizes),
            "leaf_size_max": max(sizes),
            "budget_kinds": dict(sorted(self.budget_kinds.items())),
            "persona_budget_kinds": dict(sorted(self.persona_budget_kinds.items())),
            "persona_users": len(group_sizes),
            "multi_task_users": sum(1 for size in group_sizes if size > 1),
            "largest_user_tasks": group_sizes[0] if group_sizes else 0,
            "undecidable_persona_tasks": self.undecidable,
        }


def catalog_statistics(catalog: GeneratedCatalog) -> dict[str, Any]:
    """Counts and shape figures of a generated catalog (what the manifest reports)."""
    counts = _Counts()
    for audit in catalog.audits:
        counts.add(audit)
    return counts.statistics(catalog.leaves, catalog.leaf_sizes, catalog.user_task_counts)


class _HashingWriter(io.RawIOBase):
    """A binary sink that hashes what passes through it into the file under it."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.digest.update(data)
        self.handle.write(data)
        return len(data)


def _stream_archive(target: Path, records: Iterable[dict[str, Any]]) -> tuple[str, str]:
    """Write the canonical archive record by record (no whole-archive byte string in memory).

    The bytes equal ``dump_archive_json`` (compact list, sorted keys) and, for ``.gz``, the deterministic gzip
    of ``_gzip`` (zlib's output does not depend on how the input is chunked). Temp file + rename, as before.
    Returns (archive SHA-256, decompressed data SHA-256).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".building")
    data_digest = hashlib.sha256()
    with open(temporary, "wb") as handle:
        sink = _HashingWriter(handle)
        stream: Any = (
            gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6)
            if str(target).endswith(".gz")
            else sink
        )
        index = -1
        for index, record in enumerate(records):
            chunk = ("[" if index == 0 else ",") + json.dumps(
                record, sort_keys=True, ensure_ascii=False, separators=(",", ":")
            )
            data = chunk.encode("utf-8")
            data_digest.update(data)
            stream.write(data)
        tail = ("]" if index >= 0 else "[]").encode("utf-8") + b"\n"
        data_digest.update(tail)
        stream.write(tail)
        if stream is not sink:
            stream.close()
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    return sink.digest.hexdigest(), data_digest.hexdigest()


def write_catalog(
    path: str | os.PathLike[str],
    seed: int = DEFAULT_SEED,
    config: GeneratorConfig | None = None,
    *,
    in_memory: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write the archive and ``<path>.manifest.json`` atomically (temp file + rename); returns the manifest.

    A path ending in ``.gz`` gets a deterministic gzip (mtime 0, no file name), any other path plain JSON.
    The manifest holds the generator version, seed, config, counts and the SHA-256 of the archive file and
    of its decompressed data; it has no timestamps, so it is byte-identical for the same seed too.
    Products are streamed (``CatalogStream``): drafts wait in an unlinked spill file next to the archive
    unless ``in_memory`` (the reference the byte-identity test compares with). ``progress(n)``: ``n`` more
    records were written (every 500, and the rest at the end).
    """
    config = config or GeneratorConfig()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    stream = CatalogStream(seed, config, in_memory=in_memory, spill_dir=target.parent)
    counts = _Counts()

    def records() -> Iterator[dict[str, Any]]:
        written = 0
        for record, audit in stream:
            counts.add(audit)
            yield record
            written += 1
            if progress is not None and written % 500 == 0:
                progress(500)
        if progress is not None and written % 500:
            progress(written % 500)

    archive_sha, data_sha = _stream_archive(target, records())
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "config": asdict(config),
        "archive": target.name,
        "archive_sha256": archive_sha,
        "data_sha256": data_sha,
        "vocabulary_sha256": vocabulary_sha256(),
        "counts": counts.statistics(stream.leaves, stream.leaf_sizes, stream.user_task_counts),
    }
    atomic_write_bytes(manifest_path_for(target), dump_json_file_bytes(manifest))
    return manifest

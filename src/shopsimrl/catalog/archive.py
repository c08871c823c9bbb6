"""Reading, validating and writing ShopSimulator archives (``.json`` / ``.json.gz``, a top-level array).

Both the raw source archive and an already cleaned archive are accepted: ``task_id``, ``task_uid``,
``price_upper`` and ``source_product_index`` are kept as given when present. The record checks are
``record_checks``: every problem named by record index, ASIN and field, so a broken archive is fixed in one pass.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..hashing import file_sha256 as file_sha256  # re-exported (old import path): the one SHA-256 helper
from ..hashing import sha256_hex as sha256_hex
from .record_checks import validate_records as validate_records  # re-exported (old import path)
from .records import Product


def read_archive_bytes(path: str | os.PathLike[str]) -> bytes:
    """The decompressed JSON bytes of an archive (gzip is detected by its magic number)."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"archive not found: {file}", code="archive")
    data = file.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataError(f"corrupt gzip archive {file}: {exc}", code="archive") from exc
    return data


def parse_archive_json(data: bytes, *, source: str = "archive") -> list[dict[str, Any]]:
    """Decode archive bytes into the list of product records, with a clear error on bad JSON."""
    try:
        records = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{source} is not UTF-8: {exc}", code="archive") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{source} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}", code="archive") from exc
    except RecursionError:
        raise DataError(f"{source} is nested too deeply to be an archive of product records", code="archive") from None
    if not isinstance(records, list):
        raise DataError(f"{source} must be a top-level JSON array of product records, got {type(records).__name__}", code="archive")
    return records


def load_archive(path: str | os.PathLike[str]) -> tuple[list[Product], bytes]:
    """Read and validate an archive; returns the products and the decompressed bytes (for hashing)."""
    data = read_archive_bytes(path)
    records = parse_archive_json(data, source=str(path))
    return validate_records(records, source=str(path)), data


def dump_archive_json(records: Iterable[Mapping[str, Any]]) -> bytes:
    """Canonical archive bytes: sorted keys, compact separators, UTF-8, trailing newline (docs/contract.md#cleaning)."""
    text = json.dumps(list(records), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def gzip_deterministic(data: bytes) -> bytes:
    """Gzip with mtime 0 and an empty file name, so equal data gives equal bytes."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def dump_json_file_bytes(payload: object) -> bytes:
    """Canonical bytes of a side file (manifest, exclusions): indent 2, sorted keys, trailing newline."""
    return (json.dumps(payload, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write to ``<path>.building`` then rename over ``path``: readers never see a partial file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".building")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)

"""Checking a prepared data directory against its manifest before anything in it is used.

Every file ``prepare`` wrote is listed in ``manifest.json`` with its SHA-256 and size. Opening checks each
one's presence and size, then its SHA-256, and refuses the first mismatch with a one-line
``DataError`` (``data_integrity``) naming the file. The hashes run in two threads (hashlib releases the GIL).

Cost: hashing reads every byte (about 0.1 s for the default catalog). To keep a million-product catalog's
open fast, a successful check leaves a stamp (``.verified.json``: each file's device, inode, size, mtime and
ctime with its hash); a later open re-hashes only files whose stat differs from their stamp.

What this protects against, precisely: *accidental* change. Any write through the file system changes the
file's ctime, which no user call can set back, and a copy or a replacement has another inode, so a file that
was edited (even to its old size, with its old mtime restored), cut, replaced, deleted, or copied in with a
stamp from elsewhere is re-hashed and refused. It is not a defence against someone who can write the directory
*on purpose*: the stamp is a cache of this machine's own checks, not a signature, and such a person can write a
stamp matching an edited file's new stat, or as easily rewrite ``manifest.json``'s hashes (nothing in the
directory is authenticated, and a key kept beside the data would be equally writable). Trust in a data directory
is trust in whoever can write it: keep it unwritable by others. ``SHOPSIMRL_VERIFY=full`` ignores the stamp
(``tests/test_open_stored.py`` pins both sides of this line).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import DataError
from .archive import file_sha256

STAMP_FILE = ".verified.json"
VERIFY_ENV = "SHOPSIMRL_VERIFY"


def _identity(stat: os.stat_result) -> list[int]:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _read_stamp(root: Path) -> dict[str, Any]:
    if os.environ.get(VERIFY_ENV, "").strip().lower() == "full":
        return {}
    try:
        stamp = json.loads((root / STAMP_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def write_stamp(root: Path, hashes: Mapping[str, str]) -> None:
    """Record the stat of files whose hash is known to be right (best effort: a read-only directory is fine)."""
    entries = {}
    for name, sha in hashes.items():
        try:
            entries[name] = {"sha256": sha, "stat": _identity((root / name).stat())}
        except OSError:
            continue
    temporary = root / f"{STAMP_FILE}.{os.getpid()}.{threading.get_ident()}.building"  # workers may race here
    try:
        temporary.write_text(json.dumps(entries, sort_keys=True), "utf-8")
        os.replace(temporary, root / STAMP_FILE)
    except OSError:
        temporary.unlink(missing_ok=True)


def verify_files(root: Path, files: Mapping[str, str], sizes: Mapping[str, int]) -> None:
    """Refuse the first missing, resized or altered file (``DataError`` (``data_integrity``) naming it)."""
    stamp = _read_stamp(root)
    to_hash: list[tuple[str, Path]] = []
    for name in sorted(files):
        path = root / name
        try:
            stat = path.stat()
        except OSError:
            raise DataError(
                f"{path} is missing (listed in {root / 'manifest.json'}); re-run `shopsimrl data prepare --force`", code="data_integrity"
            ) from None
        if name in sizes and stat.st_size != sizes[name]:
            raise DataError(
                f"{path} does not match its manifest ({stat.st_size} bytes, manifest.json says {sizes[name]}): "
                "the file was altered; re-run `shopsimrl data prepare --force`", code="data_integrity"
            )
        entry = stamp.get(name)
        if isinstance(entry, dict) and entry.get("sha256") == files[name] and entry.get("stat") == _identity(stat):
            continue
        to_hash.append((name, path))
    if not to_hash:
        return
    to_hash.sort(key=lambda item: -item[1].stat().st_size)  # largest first: the two threads finish together
    with ThreadPoolExecutor(max_workers=2) as pool:
        digests = dict(zip((name for name, _ in to_hash), pool.map(file_sha256, (p for _, p in to_hash)), strict=True))
    for name, _ in sorted(to_hash):
        if digests[name] != files[name]:
            raise DataError(
                f"{root / name} does not match its manifest (SHA-256 differs): the file was altered; "
                "re-run `shopsimrl data prepare --force`", code="data_integrity"
            )
    write_stamp(root, {name: sha for name, sha in files.items()})

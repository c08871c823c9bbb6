"""SHA-256 digests of files and byte strings, as the manifests record them (lowercase hex).

Why one module: the data-directory manifest, the search-index manifest, the skill bank and the default
catalog's freshness check all compare digests of files, so they must be computed one way. It sits at the top
of the package (it imports nothing from it) so that every layer, ``search`` included, can use it.
"""

from __future__ import annotations

import hashlib
import os

#: Bytes read at a time: a file of any size is hashed in constant memory.
BLOCK_BYTES = 1 << 20


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` (bytes already read, e.g. a file that is also parsed) as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the file at ``path`` as lowercase hex, read in blocks (``OSError`` if unreadable)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()

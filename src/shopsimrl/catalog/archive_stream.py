"""Reading and writing archives as streams of records, so that ``prepare`` never holds a whole catalog.

Why: parsing a million-product archive in one ``json.loads`` holds it about three times over (bytes, text,
objects); a stream holds one read block and the records of one chunk. The reader decodes the top-level array
one element at a time with ``json.JSONDecoder.raw_decode`` over a growing buffer (amortised linear: the block
doubles while an element does not fit). The writer produces exactly the bytes of ``dump_archive_json`` +
``gzip_deterministic`` (compact, sorted keys, gzip level 9, mtime 0), hashed on the way.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, cast

from ..errors import DataError

READ_BLOCK = 1 << 20
_WHITESPACE = " \t\n\r"
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_DECODER = json.JSONDecoder()


def _open_bytes(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped when it starts with the gzip magic number."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


class _Reader:
    """UTF-8 text of a (possibly gzipped) file, block by block, with the consumed prefix dropped."""

    def __init__(self, handle: IO[bytes], source: str) -> None:
        self.handle = handle
        self.source = source
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped before ``buffer``
        self.block = READ_BLOCK

    def more(self) -> bool:
        """Append at least one block; False at end of file."""
        if self.eof:
            return False
        try:
            data = self.handle.read(self.block)
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise DataError(f"{self.source} is not UTF-8: {exc}", code="archive") from None
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"corrupt gzip archive {self.source}: {exc}", code="archive") from None
        if not data:
            self.eof = True
        if self.pos:
            self.consumed += self.pos
            self.buffer = self.buffer[self.pos :]
            self.pos = 0
        self.buffer += text
        return True

    def skip_whitespace(self) -> str:
        """The next non-whitespace character ('' at end of file), not consumed."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.more():
                return ""

    def value(self) -> Any:
        """Decode one JSON value after the position's whitespace, reading on while it is incomplete."""
        self.skip_whitespace()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self._incomplete(exc):
                    self.block *= 2  # a long element: read more each time, so the retries stay linear
                    self.more()
                    continue
                raise DataError(
                    f"{self.source} is not valid JSON at character {self.consumed + exc.pos}: {exc.msg}", code="archive"
                ) from None
            except RecursionError:
                raise DataError(f"{self.source} is nested too deeply to be an archive of product records", code="archive") from None
            if not self.eof and not isinstance(value, (dict, list, str)) and (
                end + 1 >= len(self.buffer) or self.buffer[end] in _NUMBER_CHARS
            ):
                self.more()  # a number (``1`` of ``1e5``) may continue in the next block
                continue
            self.pos = end
            self.block = READ_BLOCK  # back to normal reads once the long element is through
            return value

    def _incomplete(self, exc: json.JSONDecodeError) -> bool:
        """An element cut by the block end (not a real error): reading on will tell."""
        if self.eof:
            return False
        # A cut string reports where it began; anything else fails within the last few characters.
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buffer) - 16


def iter_archive_records(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The elements of the archive's top-level JSON array, one at a time."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"archive not found: {file}", code="archive")
    with _open_bytes(file) as handle:
        reader = _Reader(handle, str(file))
        first = reader.skip_whitespace()
        if first != "[":
            kind = "nothing" if not first else "an array"
            if first:
                kind = type(reader.value()).__name__ if first not in "]}," else "invalid JSON"
            raise DataError(f"{file} must be a top-level JSON array of product records, got {kind}", code="archive")
        reader.pos += 1
        if reader.skip_whitespace() == "]":
            reader.pos += 1
        else:
            while True:
                yield reader.value()
                separator = reader.skip_whitespace()
                reader.pos += 1
                if separator == "]":
                    break
                if separator != ",":
                    raise DataError(
                        f"{file} is not valid JSON at character {reader.consumed + reader.pos - 1}: "
                        "expected ',' or ']' after an array element", code="archive"
                    )
        if reader.skip_whitespace():
            raise DataError(f"{file} is not valid JSON: extra data after the top-level array", code="archive")


class ArchiveWriter:
    """Streams records into a gzipped archive identical to ``gzip_deterministic(dump_archive_json(records))``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary = path.with_name(path.name + ".building")
        self._handle = open(self.temporary, "wb")  # noqa: SIM115 - open across add() calls, closed by finish/abort
        self._compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        self._data_sha = hashlib.sha256()
        self._file_sha = hashlib.sha256()
        self._count = 0
        self._pending: list[bytes] = []
        self._pending_size = 0

    def add(self, record: Mapping[str, Any]) -> str:
        """Append one record; returns its canonical JSON text (what a reader of the archive will parse)."""
        text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        self._write((b"[" if self._count == 0 else b",") + text.encode("utf-8"))
        self._count += 1
        return text

    def _write(self, data: bytes) -> None:
        self._data_sha.update(data)
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= READ_BLOCK:
            self._flush_pending()

    def _flush_pending(self) -> None:
        compressed = self._compressor.compress(b"".join(self._pending))
        self._pending, self._pending_size = [], 0
        self._file_sha.update(compressed)
        self._handle.write(compressed)

    def finish(self) -> tuple[str, str]:
        """Close and rename into place; returns (SHA-256 of the decompressed data, SHA-256 of the file)."""
        self._write(b"]\n" if self._count else b"[]\n")
        self._flush_pending()
        tail = self._compressor.flush()
        self._file_sha.update(tail)
        self._handle.write(tail)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self.temporary, self.path)
        return self._data_sha.hexdigest(), self._file_sha.hexdigest()

    def abort(self) -> None:
        self._handle.close()
        self.temporary.unlink(missing_ok=True)

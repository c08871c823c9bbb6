"""Read-only SQLite connections to one index file: the package's one way to open them, and a small pool.

Why a pool: a ``sqlite3.Connection`` must not run two statements from two threads at once, but one open
index serves every session and thread of a process; each query borrows an idle connection (or opens one
when more threads query at once than ever before) and gives it back. Why the identity check: a rebuilt
index is a new file renamed over the old one, and answering from a connection to the old file (or mixing
the two) would silently give the old ranking.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataError

#: Memory-mapped I/O for reads (SQLite maps at most the file's size).
MMAP_BYTES = 1 << 30

#: (device, inode, size, mtime in ns) of a file.
FileIdentity = tuple[int, int, int, int]


def read_only_connection(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection that cannot write ``path`` (``mode=ro``, ``query_only``), usable from any one thread at a time.

    Raises:
        sqlite3.Error: the file cannot be opened as a SQLite database.
    """
    connection = sqlite3.connect(
        f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
    )
    try:
        connection.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        connection.execute("PRAGMA query_only = 1")
    except BaseException:
        connection.close()
        raise
    return connection


@contextmanager
def writable_temp_schema(connection: sqlite3.Connection) -> Iterator[None]:
    """Lift ``query_only`` for a block that creates or drops ``temp`` objects (the file itself stays ``mode=ro``)."""
    connection.execute("PRAGMA query_only = 0")
    try:
        yield
    finally:
        connection.execute("PRAGMA query_only = 1")


def file_identity(path: Path) -> FileIdentity:
    """(device, inode, size, mtime): a rebuilt index (a new file renamed over this one) changes it."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class ConnectionPool:
    """Idle read-only connections to ``path``, all to the file that was there when the pool was made."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: The file's identity when the pool was made; every new connection must find the same file.
        self.identity = file_identity(path)
        self._idle: list[sqlite3.Connection] = []  # guarded by _lock
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise ``DataError`` (``search_unavailable``) once the pool is closed."""
        if self._closed:
            raise DataError(f"search index {self.path} is closed", code="search_unavailable")

    def check_same_file(self) -> None:
        """Refuse to answer from an index file that was replaced or removed after it was opened."""
        try:
            same_file = file_identity(self.path) == self.identity
        except OSError:
            same_file = False
        if not same_file:
            raise DataError(
                f"search index {self.path} was replaced or removed after it was opened; open it again", code="search_unavailable"
            )

    def acquire(self) -> sqlite3.Connection:
        """An idle connection, or a new one (checked to reach the same file) when none is idle.

        Raises:
            DataError: the pool is closed, or the file was replaced or removed.
            sqlite3.Error: a new connection could not be opened.
        """
        with self._lock:
            self.check_open()
            if self._idle:
                return self._idle.pop()
        self.check_same_file()
        connection = read_only_connection(self.path)
        try:
            self.check_same_file()  # replaced between the check and the open: this connection reads the new file
        except DataError:
            connection.close()
            raise
        return connection

    def release(self, connection: sqlite3.Connection) -> None:
        """Give a connection back (closed instead once the pool is closed)."""
        with self._lock:
            if not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A borrowed connection for the duration of the block."""
        connection = self.acquire()
        try:
            yield connection
        finally:
            self.release(connection)

    def close(self) -> None:
        """Close the idle connections; one in use closes when it is released."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

"""Run a function in a forked child and return what it returned (or the repr of what it raised).

Why: stores and indexes are shared with forked workers (the server's worker processes, Ray actors); a test must
see what a child reads, not only what the parent does, and a child's failure must reach the parent's assertion.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any


def in_forked_child(work: Callable[[], Any]) -> Any:
    """``work()`` run in a forked child: its pickled result, or ``repr`` of the exception it raised."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        try:
            payload = pickle.dumps(work())
        except BaseException as exc:  # report anything to the parent
            payload = pickle.dumps(repr(exc))
        with os.fdopen(write_end, "wb") as handle:
            handle.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        reply = pickle.loads(handle.read())
    os.waitpid(child, 0)
    return reply

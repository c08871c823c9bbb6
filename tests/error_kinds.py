"""``raises_kind(cls, code)``: ``pytest.raises`` for a boundary error class that also checks the error's ``code``.

Errors are classes by boundary (``shopsimrl.errors``) and the detail is the ``code``; a test that pinned an old
feature class pins the pair instead."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shopsimrl.errors import ShopSimError


@contextmanager
def raises_kind(kind: type[ShopSimError], code: str, *, match: str | None = None) -> Iterator[Any]:
    """Expect ``kind`` with ``code`` (and a message matching ``match``); yields pytest's ``ExceptionInfo``."""
    assert code in kind.codes, f"{kind.__name__} has no code {code!r}"
    with pytest.raises(kind, match=match) as info:
        yield info
    assert info.value.code == code, f"expected {kind.__name__}({code}), got code {info.value.code!r}: {info.value}"

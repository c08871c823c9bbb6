"""Argument values written inline in model text: Gemma 4's tool-call objects (``{key:<|"|>text<|"|>,n:3}``) and
LFM2's Python-style call arguments (``'text'``, ``3``, ``True``, ``[1, 'a']``, ``{"k": "v"}``).

A recursive-descent scanner over positions, shared by both dialects: each character is read a bounded number
of times (strings end at the first closing delimiter found with ``str.find``; a Python quote that the template
does not escape closes only where a delimiter follows it), nesting is capped at :data:`MAX_DEPTH`, so model
text of any shape costs linear time and fails with :class:`~shopsimrl.errors.DataError` (the
message says where).
Private to ``tool_formats``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import DataError

MAX_DEPTH = 32
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_SPACE = " \t\r\n"
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "\\": "\\", "'": "'", '"': '"', "/": "/"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}  # Python's repr and JSON write other characters as hex escapes
GEMMA_QUOTE = '<|"|>'


def _error(message: str, position: int) -> DataError:
    """Where and why a value does not scan."""
    return DataError(f"{message} at character {position}", code="response_format")


@dataclass(frozen=True)
class Dialect:
    """How one template family writes values."""

    gemma: bool  # strings between <|"|> marks, bare object keys, separators without spaces
    escapes: bool = True  # Python dialect: backslash escapes inside quotes (LFM2 2.5 writes strings raw)


GEMMA = Dialect(gemma=True)
PYTHON = Dialect(gemma=False)
PYTHON_RAW = Dialect(gemma=False, escapes=False)

_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def scan_value(text: str, i: int, dialect: Dialect, depth: int = 0) -> tuple[Any, int]:
    """(the value that starts at ``text[i]``, the position after it)."""
    if depth > MAX_DEPTH:
        raise _error(f"values nested deeper than {MAX_DEPTH}", i)
    i = skip_space(text, i)
    if i >= len(text):
        raise _error("a value is missing", i)
    char = text[i]
    if dialect.gemma and text.startswith(GEMMA_QUOTE, i):
        end = text.find(GEMMA_QUOTE, i + len(GEMMA_QUOTE))
        if end < 0:
            raise _error("an unclosed <|\"|> string", i)
        return text[i + len(GEMMA_QUOTE):end], end + len(GEMMA_QUOTE)
    if not dialect.gemma and char in "'\"":
        return _python_string(text, i, dialect)
    if char == "[":
        return _sequence(text, i + 1, "]", dialect, depth)
    if char == "{":
        return _mapping(text, i + 1, dialect, depth)
    number = _NUMBER.match(text, i)
    if number is not None:
        try:
            return json.loads(number.group()), number.end()
        except ValueError as exc:  # an integer past Python's digit limit
            raise _error(f"an unreadable number ({exc})", i) from exc
    word = _WORD.match(text, i)
    if word is not None and word.group() in _WORDS:
        return _WORDS[word.group()], word.end()
    raise _error(f"no value can start with {text[i:i + 12]!r}", i)


def _python_string(text: str, i: int, dialect: Dialect) -> tuple[str, int]:
    quote = text[i]
    if not dialect.escapes:  # written raw: the closing quote is the first one a delimiter follows
        j = i + 1
        while (j := text.find(quote, j)) >= 0:
            after = skip_space(text, j + 1)
            if after >= len(text) or text[after] in ",)]}:":
                return text[i + 1:j], j + 1
            j += 1
        raise _error("an unclosed string", i)
    parts: list[str] = []
    j = i + 1
    close = text.find(quote, j)
    while True:  # one find for the next quote, re-run only when an escape consumed it: linear
        slash = text.find("\\", j, close if close >= 0 else len(text))
        if slash < 0:
            if close < 0:
                raise _error("an unclosed string", i)
            parts.append(text[j:close])
            return "".join(parts), close + 1
        if slash + 1 >= len(text):
            raise _error("a string ends in a backslash", slash)
        parts.append(text[j:slash])
        escaped, j = _escape(text, slash)
        parts.append(escaped)
        if close >= 0 and close < j:
            close = text.find(quote, j)


def _escape(text: str, slash: int) -> tuple[str, int]:
    """(the character the escape at ``text[slash] == "\\"`` stands for, the position after it)."""
    kind = text[slash + 1]
    width = _HEX_ESCAPES.get(kind)
    if width is None:
        return _ESCAPES.get(kind, "\\" + kind), slash + 2
    digits = text[slash + 2:slash + 2 + width]
    try:
        if len(digits) != width:
            raise ValueError(digits)
        return chr(int(digits, 16)), slash + 2 + width
    except ValueError as exc:
        raise _error(f"a bad \\{kind} escape", slash) from exc


def _sequence(text: str, i: int, close: str, dialect: Dialect, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    i = skip_space(text, i)
    if text.startswith(close, i):
        return items, i + 1
    while True:
        value, i = scan_value(text, i, _nested(dialect), depth + 1)
        items.append(value)
        i = skip_space(text, i)
        if text.startswith(close, i):
            return items, i + 1
        if not text.startswith(",", i):
            raise _error(f"expected ',' or {close!r}", i)
        i += 1


def _nested(dialect: Dialect) -> Dialect:
    """Inside a list or dict LFM2 2.5 writes Python's repr / JSON (escaped), whatever its top-level strings."""
    return dialect if dialect.gemma or dialect.escapes else PYTHON


def _key(text: str, i: int, dialect: Dialect) -> tuple[str, int]:
    i = skip_space(text, i)
    if dialect.gemma:
        if text.startswith(GEMMA_QUOTE, i):
            key, i = scan_value(text, i, dialect)
            return str(key), i
        word = _WORD.match(text, i)
        if word is None:
            raise _error("expected a key", i)
        return word.group(), word.end()
    if i < len(text) and text[i] in "'\"":
        return _python_string(text, i, _nested(dialect))
    raise _error("expected a quoted key", i)


def _mapping(text: str, i: int, dialect: Dialect, depth: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = skip_space(text, i)
    if text.startswith("}", i):
        return out, i + 1
    while True:
        key, i = _key(text, i, dialect)
        i = skip_space(text, i)
        if not text.startswith(":", i):
            raise _error("expected ':'", i)
        out[key], i = scan_value(text, i + 1, _nested(dialect), depth + 1)
        i = skip_space(text, i)
        if text.startswith("}", i):
            return out, i + 1
        if not text.startswith(",", i):
            raise _error("expected ',' or '}'", i)
        i += 1


def scan_gemma_object(text: str, i: int) -> tuple[dict[str, Any], int]:
    """Gemma 4's argument object that opens at ``text[i] == "{"``."""
    if not text.startswith("{", i):
        raise _error("expected '{'", i)
    return _mapping(text, i + 1, GEMMA, 0)


def scan_python_calls(text: str, i: int, dialect: Dialect) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """LFM2's ``[name(key=value, ...), ...]`` list that opens at ``text[i] == "["``: ((name, arguments), end)."""
    if not text.startswith("[", i):
        raise _error("expected '['", i)
    calls: list[tuple[str, dict[str, Any]]] = []
    i = skip_space(text, i + 1)
    while not text.startswith("]", i):
        name = _WORD.match(text, i)
        if name is None or not text.startswith("(", name.end()):
            raise _error("expected a call name(", i)
        arguments: dict[str, Any] = {}
        i = skip_space(text, name.end() + 1)
        while not text.startswith(")", i):
            key = _WORD.match(text, i)
            if key is None or not text.startswith("=", skip_space(text, key.end())):
                raise _error("expected key=value", i)
            arguments[key.group()], i = scan_value(text, skip_space(text, key.end()) + 1, dialect, 1)
            i = skip_space(text, i)
            if text.startswith(",", i):
                i = skip_space(text, i + 1)
            elif not text.startswith(")", i):
                raise _error("expected ',' or ')'", i)
        calls.append((name.group(), arguments))
        i = skip_space(text, i + 1)
        if text.startswith(",", i):
            i = skip_space(text, i + 1)
        elif not text.startswith("]", i):
            raise _error("expected ',' or ']'", i)
    return calls, i + 1

"""Reading the package's own JSON side files with one clear error for every way they can be broken.

Manifests and split files are small, but a user can point any command at any directory: a file that is a
directory, an edited file that is no longer JSON, or one nested thousands of levels deep must give a one-line
typed error naming the file, never a traceback from the standard library.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import DataError, ShopSimError


def read_json_file(
    path: str | os.PathLike[str], *, error: type[ShopSimError] = DataError, code: str = "data_file",
    expect: type | None = dict,
) -> Any:
    """The parsed content of ``path``; raises ``error`` with ``code`` (a boundary class and one of its codes)
    naming the file otherwise.

    ``expect`` is the required top-level type (``None``: any JSON value).
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise error(f"{file} is missing", code=code) from None
    except IsADirectoryError:
        raise error(f"{file} is a directory, not a JSON file", code=code) from None
    except OSError as exc:
        raise error(f"{file} cannot be read: {exc.strerror or exc}", code=code) from None
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{file} is not UTF-8 (byte {exc.start})", code=code) from None
    except json.JSONDecodeError as exc:
        raise error(f"{file} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}", code=code) from None
    except RecursionError:
        raise error(f"{file} is not valid JSON: nested too deeply", code=code) from None
    if expect is not None and not isinstance(value, expect):
        raise error(f"{file} must hold a JSON {_json_type(expect)}, not {_json_type(type(value))}", code=code)
    return value


def _json_type(kind: type) -> str:
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(kind, "null" if kind is type(None) else kind.__name__)

"""The LLM shopper's reply cache: one small JSON file per request, named by a hash of what shapes the reply.

The key hashes the whole conversation sent, the model, the sampling settings and the shopper protocol version
(not the endpoint's address), so a resumed or repeated run asks nothing it has asked before and a changed
prompt or model never replays a stale reply. Files are written to a unique temporary name and renamed into
place, so concurrent episodes and processes never see half a file; an unreadable entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CACHE_DIRNAME = "shopper_cache"  # inside a run directory
MAX_ENTRY_BYTES = 1 << 16


def cache_key(request: Mapping[str, Any]) -> str:
    """SHA-256 of the request's canonical JSON (sorted keys, UTF-8)."""
    text = json.dumps(request, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplyCache:
    """``<root>/<key[:2]>/<key>.json`` holding ``{"key", "reply", "finish_reason"}``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._written = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            if path.stat().st_size > MAX_ENTRY_BYTES:
                return None
            entry = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        reply = entry.get("reply") if isinstance(entry, dict) and entry.get("key") == key else None
        return reply if isinstance(reply, str) and reply else None

    def put(self, key: str, reply: str, finish_reason: str | None) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._written += 1
            serial = self._written
        tmp = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.{serial}.tmp")
        payload = {"key": key, "reply": reply, "finish_reason": finish_reason}
        tmp.write_text(json.dumps(payload, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
        os.replace(tmp, path)

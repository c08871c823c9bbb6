"""Per-field search documents (env_spec §3.3, option document ``public-axis-value-v1``).

Only public product facts are indexed: no instructions, goals, prices, images or variant ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .text import normalize_query, search_tokens

FIELDS = ("title", "brand", "category", "model", "attributes", "options", "bullets")
_MODEL_TOKEN = re.compile(r"(?<![a-z0-9])[a-z0-9]+(?:[._+\-/][a-z0-9]+)*(?![a-z0-9])")
_HAS_LETTER = re.compile(r"[a-z]")
_HAS_DIGIT = re.compile(r"[0-9]")


def _first(product: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = product.get(key)
        if value:
            return value
    return None


def flatten(value: Any) -> list[str]:
    """Dicts give key then value (keys in str order), sequences their items, scalars ``str(x)``, None nothing."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        out: list[str] = []
        for key in sorted(value, key=str):
            out.append(str(key))
            out.extend(flatten(value[key]))
        return out
    if isinstance(value, (list, tuple, set)):
        items = sorted(value, key=str) if isinstance(value, set) else value
        return [text for item in items for text in flatten(item)]
    return [str(value)]


def model_text(title: str) -> str:
    normalized = normalize_query(title)
    codes = [
        token for token in _MODEL_TOKEN.findall(normalized)
        if _HAS_LETTER.search(token) and _HAS_DIGIT.search(token)
    ]
    return " ".join(dict.fromkeys(codes))


def options_text(product: Mapping[str, Any]) -> str:
    options = product.get("customization_options")
    if not (isinstance(options, Mapping) and options):
        options = product.get("options")
    if not isinstance(options, Mapping):
        return ""
    parts: list[str] = []
    for axis in sorted(options, key=str):
        name = str(axis).strip()
        if name:
            parts.append(name)
        entries = options[axis]
        if entries is None:
            continue
        if isinstance(entries, set):
            entries = sorted(entries, key=str)
        elif not isinstance(entries, (list, tuple)):
            entries = [entries]
        for entry in entries:
            value = entry.get("value") if isinstance(entry, Mapping) else entry
            if value is None or value == "":
                continue
            text = str(value).strip()
            if text:
                parts.append(text)
    return " ".join(parts)


def raw_fields(product: Mapping[str, Any]) -> dict[str, str]:
    title = str(_first(product, "title", "Title") or "")
    return {
        "title": title,
        "brand": str(_first(product, "brand", "shop_name") or ""),
        "category": str(_first(product, "category", "product_category") or ""),
        "model": model_text(title),
        "attributes": " ".join(flatten(_first(product, "attribute", "Attributes") or [])),
        "options": options_text(product),
        "bullets": " ".join(flatten(_first(product, "small_description", "sub_title", "BulletPoints") or [])),
    }


def product_search_fields(product: Mapping[str, Any]) -> dict[str, str]:
    """The seven indexed fields, each the field's tokens joined by single spaces."""
    return {name: " ".join(search_tokens(text)) for name, text in raw_fields(product).items()}
